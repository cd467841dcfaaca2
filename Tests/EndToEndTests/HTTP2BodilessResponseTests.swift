import Foundation
import PinproxyTestSupport
import Testing

/// An h2 upstream that sends DATA with a 204 (docs/contract.md §11): an
/// HTTP/1.1 app's next answer on the same connection must be its own, not
/// those bytes. The upstream is Python's `h2` behind Python `ssl` (ALPN h2);
/// the app reads HTTP/1.1 byte by byte, two requests on one intercepted session.
@Suite("Bodies on bodiless responses from an h2 upstream", .blockingWaits, .serialized)
struct HTTP2BodilessResponseTests {
    static let upstreamScript = #"""
        import socket, ssl, sys, threading, time
        import h2.config, h2.connection, h2.events
        chain, key = sys.argv[1], sys.argv[2]
        INJECTED = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\ninjected"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(chain, key)
        ctx.set_alpn_protocols(["h2"])
        def serve(sock):
            try:
                tls = ctx.wrap_socket(sock, server_side=True)
                conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
                conn.initiate_connection()
                tls.sendall(conn.data_to_send())
                while True:
                    data = tls.recv(65536)
                    if not data:
                        return
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.RequestReceived):
                            path = dict(event.headers)[":path"]
                            print("REQ %s" % path, flush=True)
                            if path.startswith("/no-content"):
                                conn.send_headers(event.stream_id, [(":status", "204")])
                                conn.send_data(event.stream_id, INJECTED, end_stream=True)
                            else:
                                conn.send_headers(event.stream_id, [(":status", "200"), ("content-length", "4")])
                                conn.send_data(event.stream_id, b"mine", end_stream=True)
                    tls.sendall(conn.data_to_send())
            except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as error:
                print("ERR %r" % error, flush=True)
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        print("PORT %d" % server.getsockname()[1], flush=True)
        server.settimeout(1)
        deadline = time.time() + 600  # bounded: gone after ten minutes whatever happens
        while time.time() < deadline:
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        """#

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
        let pki = try TestPKI.make(in: dir, names: ["bodiless.test"])
        let script = try dir.write("h2_upstream.py", Self.upstreamScript)
        let upstream = try ChildProcess("python3", ["-u", script, pki.chainFile, pki.leafKey], directory: dir, name: "h2-upstream")
        defer { upstream.stop() }
        let port = try upstream.waitForOutput(timeout: 20) { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: bodiless.test
                upstream: 127.0.0.1:\(port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        // An app that reads its connection as HTTP/1.1 says (a legacy app on raw
        // sockets): two requests in turn, everything received kept. curl and
        // Python's http.client throw away bytes after a 204; this app does not.
        let app = try dir.write("raw_app.py", Self.appScript)
        let received = try ChildProcess.run("python3", [app, String(proxy.port), proxy.caFile, "bodiless.test"]).output
        #expect(received.hasPrefix("HTTP/1.1 204 No Content\r\n"), "\(received)")
        #expect(received.components(separatedBy: "HTTP/1.1 ").count == 3, "exactly two answers: \(received)")
        #expect(received.hasSuffix("\r\n\r\nmine\n"), "the second answer is the upstream's own: \(received)")
        #expect(!received.contains("injected"), "\(received)")
        #expect(upstream.outputText.contains("REQ /after"))
        // Counted and logged.
        let admin = try proxy.adminPort
        #expect(try await pollUntil(timeout: 10) {
            try ChildProcess.run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).output
                .contains(#"pinproxy_upstream_violations_total{host="bodiless.test",kind="body_on_bodiless_response"} 1"#)
        })
        #expect(await pollUntil(timeout: 10) { proxy.log.contains("upstream sent a body with a response that has none") })
    }
}
