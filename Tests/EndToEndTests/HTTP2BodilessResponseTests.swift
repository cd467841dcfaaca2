import Foundation
import PinproxyTestSupport
import Testing

/// An h2 upstream that sends DATA with a 204 (docs/contract.md §11): an
/// HTTP/1.1 app's next answer on the same connection must be its own, not
/// those bytes. The upstream is Python's `h2` behind Python `ssl` (ALPN h2);
/// the app reads HTTP/1.1 byte by byte, two requests on one intercepted session.
@Suite("Bodies on bodiless responses from an h2 upstream", .blockingWaits, .serialized)
struct HTTP2BodilessResponseTests {
    static let appScript = #"""
        import socket, ssl, sys
        port, ca, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        tls = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname=host)
        received = b""
        for path, until in (("/no-content", b"\r\n\r\n"), ("/after", b"mine")):
            tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
            while until not in received[received.rfind(b"HTTP/1.1 "):]:
                data = tls.recv(65536)
                if not data:
                    break
                received += data
        print(received.decode("latin-1"), flush=True)
        """#

    @Test func aBodyWithA204NeverBecomesTheAppsNextAnswer() async throws {
        let dir = try TemporaryDirectory("pinproxy-h2-bodiless")
        let upstream = try PythonH2Upstream(mode: "bodiless", host: "bodiless.test", in: dir)
        defer { upstream.stop() }
        let proxy = try ProxyHarness(policies: upstream.policy("bodiless.test"), mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        // An app that reads its connection as HTTP/1.1 says (a legacy app on raw
        // sockets): two requests in turn, everything received kept. curl and
        // Python's http.client throw away bytes after a 204; this app does not.
        let app = try dir.write("raw_app.py", Self.appScript)
        let received = try ChildProcess.run("python3", [app, String(proxy.port), proxy.caFile, "bodiless.test"]).output
        #expect(received.hasPrefix("HTTP/1.1 204 No Content\r\n"), "\(received)")
        #expect(received.components(separatedBy: "HTTP/1.1 ").count == 3, "exactly two answers: \(received)")
        #expect(received.hasSuffix("\r\n\r\nmine\n"), "the second answer is the upstream's own: \(received)")
        #expect(!received.contains("injected"), "\(received)")
        #expect(upstream.process.outputText.contains("REQ /after"))
        // Counted and logged.
        let admin = try proxy.adminPort
        #expect(try await pollUntil(timeout: 10) {
            try ChildProcess.run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).output
                .contains(#"pinproxy_upstream_violations_total{host="bodiless.test",kind="body_on_bodiless_response"} 1"#)
        })
        #expect(await pollUntil(timeout: 10) { proxy.log.contains("upstream sent a body with a response that has none") })
    }
}
