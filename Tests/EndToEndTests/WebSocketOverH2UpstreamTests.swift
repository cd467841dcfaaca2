import Foundation
import PinproxyTestSupport
import Testing

/// A WebSocket upgrade to an upstream that also speaks HTTP/2 (docs/contract.md
/// §11): the upgrade exists only in HTTP/1.1, so pinproxy must dial it offering
/// only `http/1.1` and never put it on a pooled h2 connection's stream. nginx
/// (`http2`, with a WebSocket location in front of Python's `websockets`) is
/// the upstream; `websocket-client` is the app.
@Suite("WebSocket to an upstream that offers h2", .serialized)
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
        let nginxPort = try HTTP2Tests.Setup.freePort()
        try FileManager.default.createDirectory(atPath: dir.file("nginx"), withIntermediateDirectories: true)
        let conf = try dir.write("nginx/nginx.conf", """
            worker_processes 1;
            daemon off;
            pid \(dir.file("nginx/nginx.pid"));
            error_log \(dir.file("nginx/error.log"));
            events { worker_connections 64; }
            http {
              log_format p '$server_protocol $request_uri $status';
              access_log \(dir.file("nginx/access.log")) p;
              client_body_temp_path \(dir.file("nginx/body"));
              proxy_temp_path \(dir.file("nginx/proxy"));
              server {
                listen 127.0.0.1:\(nginxPort) ssl http2;
                ssl_certificate \(pki.chainFile);
                ssl_certificate_key \(pki.leafKey);
                location /echo {
                  proxy_pass https://127.0.0.1:\(wsPort);
                  proxy_http_version 1.1;
                  proxy_set_header Upgrade $http_upgrade;
                  proxy_set_header Connection "upgrade";
                }
                location / { return 200 "proto=$server_protocol\\n"; }
              }
            }
            """)
        let nginx = try ChildProcess("nginx", ["-p", dir.file("nginx"), "-c", conf], directory: dir, name: "nginx")
        defer { nginx.stop() }
        #expect(pollUntil(timeout: 10) { FileManager.default.fileExists(atPath: dir.file("nginx/nginx.pid")) }, "\(nginx.outputText)")
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: wsh2.test
                upstream: 127.0.0.1:\(nginxPort)
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

        let log = TextFile.read(dir.file("nginx/access.log"))
        #expect(log.contains("HTTP/2.0 /plain 200"), "\(log)")
        #expect(log.contains("HTTP/1.1 /echo 101"), "the upgrade went over HTTP/1.1: \(log)")
    }
}
