import Foundation
import PinproxyTestSupport
import Testing

/// `client_handshakes_total` counts handshakes (docs/contract.md §6, issue
/// 27 item 9): an app whose handshake succeeded and that then hangs up, with
/// close_notify or (as most HTTP clients do once a response is framed)
/// without, is one `ok` and no failure, and no "handshake failed" warning.
@Suite("Client handshake counting", .blockingWaits, .serialized)
struct ClientHandshakeCountTests {
    static let client = """
        import socket, ssl, sys
        port, cafile, notify = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "notify"
        raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        raw.sendall(b"CONNECT api.test:443 HTTP/1.1\\r\\nHost: api.test:443\\r\\n\\r\\n")
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            data = raw.recv(4096)
            if not data: sys.exit("no answer to CONNECT")
            head += data
        assert head.startswith(b"HTTP/1.1 200"), head
        tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname="api.test")
        tls.sendall(b"GET /status/204 HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n")
        answer = b""
        while b"\\r\\n\\r\\n" not in answer:
            data = tls.recv(4096)
            if not data: sys.exit("no response")
            answer += data
        print(answer.split(b"\\r\\n")[0].decode())
        if notify:
            tls.unwrap().close()   # close_notify, then the socket
        else:
            tls.close()            # the socket alone: no close_notify
        """

    @Test func aCloseAfterAGoodHandshakeIsNoFailedHandshake() async throws {
        let dir = try TemporaryDirectory("pinproxy-client-handshakes")
        let pki = try TestPKI.make(in: dir, names: ["api.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: api.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        func metrics() throws -> PrometheusText {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body)
        }
        let script = try dir.write("client.py", Self.client)
        for mode in ["notify", "hang-up"] {
            let (status, output) = try ChildProcess.run("/usr/bin/python3", [script, String(proxy.port), proxy.caFile, mode])
            #expect(status == 0 && output.contains("HTTP/1.1 204"), "\(mode): \(output)")
        }
        // Both connections are gone once the gauge is back at 0: their close
        // (and any error it raised) has been handled by then.
        let open = try await pollFor(timeout: 10) { () -> Double? in
            let value = try metrics().value("pinproxy_client_connections", [:])
            return value == 0 ? value : nil
        }
        #expect(open == 0)
        let after = try metrics()
        #expect(after.value("pinproxy_client_handshakes_total", ["result": "ok"]) == 2)
        let failed = after.matching("pinproxy_client_handshakes_total").filter { $0.labels["result"] != "ok" }.map(\.value).reduce(0, +)
        #expect(failed == 0, "\(after.matching("pinproxy_client_handshakes_total"))")
        #expect(!proxy.log.contains("client TLS handshake failed"), "\(proxy.log.suffix(2000))")
    }
}
