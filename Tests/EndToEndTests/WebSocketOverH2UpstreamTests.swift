import Foundation
import PinproxyTestSupport
import Testing

/// A WebSocket upgrade to an upstream that also speaks HTTP/2 (docs/contract.md
/// §11): the upgrade exists only in HTTP/1.1, so pinproxy must dial it offering
/// only `http/1.1` and never put it on a pooled h2 connection's stream. nginx
/// (`http2`, with a WebSocket location in front of Python's `websockets`) is
/// the upstream; `websocket-client` is the app.
@Suite("WebSocket to an upstream that offers h2", .blockingWaits, .serialized)
struct WebSocketOverH2UpstreamTests {
    @Test func theUpgradeGoesOverHTTP1WhileOtherRequestsUseH2() async throws {
        let dir = try TemporaryDirectory("pinproxy-ws-h2")
        let pki = try TestPKI.make(in: dir, names: ["wsh2.test"])
        let serverScript = try dir.write("ws_server.py", WebSocketTests.serverScript)
        let client = try dir.write("ws_client.py", WebSocketTests.clientScript)
        let wsServer = try ChildProcess("python3", [serverScript, pki.chainFile, pki.leafKey], directory: dir, name: "ws-server")
        defer { wsServer.stop() }
        let wsPort = try wsServer.waitForOutput(timeout: 20) { text in
            text.split(separator: "\n").first { $0.hasPrefix("listening ") }.flatMap { Int($0.dropFirst(10)) }
        }
        let nginx = try NginxServer(in: dir, chain: pki.chainFile, key: pki.leafKey, server: """
                location /echo {
                  proxy_pass https://127.0.0.1:\(wsPort);
                  proxy_http_version 1.1;
                  proxy_set_header Upgrade $http_upgrade;
                  proxy_set_header Connection "upgrade";
                }
                location / { return 200 "proto=$server_protocol\\n"; }
            """)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: wsh2.test
                upstream: 127.0.0.1:\(nginx.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)

        // An ordinary request first: it leaves an h2 connection with room in the pool.
        let plain = try ChildProcess.run("curl", ["-s", "--cacert", proxy.caFile, "-x", proxy.proxyURL, "https://wsh2.test/plain"])
        #expect(plain.output == "proto=HTTP/2.0\n", "\(plain.output)")

        let result = try ChildProcess.run("python3", [client, "echo", String(proxy.port), proxy.caFile, "wsh2.test"])
        let out = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any], "\(result.output)")
        #expect((out["texts"] as? [String])?.count == 100)
        #expect((out["texts"] as? [String])?.last == "message 99")
        #expect(out["binary_sent"] as? String == out["binary_echoed"] as? String)

        let log = nginx.accessLog.joined(separator: "\n")
        #expect(log.contains("HTTP/2.0 /plain 200"), "\(log)")
        #expect(log.contains("HTTP/1.1 /echo 101"), "the upgrade went over HTTP/1.1: \(log)")
    }
}
