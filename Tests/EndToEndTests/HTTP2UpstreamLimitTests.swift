import Foundation
import PinproxyTestSupport
import Testing

/// `max_upstream_connections: 1` towards an h2 upstream that allows 8
/// streams (docs/contract.md §11): while a slow download holds one stream,
/// requests from other app connections (on either of pinproxy's event
/// loops) get streams on the same connection, not 503 `queue_timeout`.
/// nginx (`http2`, `http2_max_concurrent_streams 8`, `limit_rate`) is the
/// upstream; curl is the app.
@Suite("HTTP/2 upstream at its connection limit", .serialized)
struct HTTP2UpstreamLimitTests {
    @Test func aBusyH2ConnectionCarriesRequestsFromEveryLoop() async throws {
        let dir = try TemporaryDirectory("pinproxy-h2-limit")
        let pki = try TestPKI.make(in: dir, names: ["limit.test"])
        let nginxPort = try HTTP2Tests.Setup.freePort()
        try FileManager.default.createDirectory(atPath: dir.file("nginx/www"), withIntermediateDirectories: true)
        // 8 MiB at 256 KiB/s: the download holds its stream for about 30 s (cut at 20 s).
        try dir.write("nginx/www/big", String(repeating: "x", count: 8 << 20))
        let conf = try dir.write("nginx/nginx.conf", """
            worker_processes 1;
            daemon off;
            user root;
            # (the worker reads the file under the test's private temp dir; ignored when not root)
            pid \(dir.file("nginx/nginx.pid"));
            error_log \(dir.file("nginx/error.log"));
            events { worker_connections 64; }
            http {
              log_format p '$connection $server_protocol $request_uri $status';
              access_log \(dir.file("nginx/access.log")) p;
              client_body_temp_path \(dir.file("nginx/body"));
              http2_max_concurrent_streams 8;
              server {
                listen 127.0.0.1:\(nginxPort) ssl http2;
                ssl_certificate \(pki.chainFile);
                ssl_certificate_key \(pki.leafKey);
                location /big { root \(dir.file("nginx/www")); limit_rate 256k; }
                location / { return 200 "fast\\n"; }
              }
            }
            """)
        let nginx = try ChildProcess("nginx", ["-p", dir.file("nginx"), "-c", conf], directory: dir, name: "nginx")
        defer { nginx.stop() }
        #expect(pollUntil(timeout: 10) { FileManager.default.fileExists(atPath: dir.file("nginx/nginx.pid")) }, "\(nginx.outputText)")
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: limit.test
                upstream: 127.0.0.1:\(nginxPort)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                max_upstream_connections: 1
                queue_timeout: 2s
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = try proxy.adminPort

        let slow = try ChildProcess("curl", ["-sS", "-o", "/dev/null", "--max-time", "20", "--cacert", proxy.caFile,
                                             "-x", proxy.proxyURL, "https://limit.test/big"], directory: dir, name: "slow-curl")
        defer { slow.stop() }
        // The download is under way when its stream shows in the gauge.
        #expect(try pollUntil(timeout: 10) {
            try ChildProcess.run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).output
                .contains(#"pinproxy_upstream_streams{host="limit.test"} 1"#)
        }, "\(slow.outputText) \(TextFile.read(dir.file("nginx/access.log"))) \(TextFile.read(dir.file("nginx/error.log")))")
        // Each curl is a new app connection; pinproxy accepts them on its loops in turn.
        for index in 0..<4 {
            let answer = try Curl.run("https://limit.test/fast-\(index)", proxy: proxy, directory: dir)
            #expect(answer.status == 200, "request \(index): \(answer.status) \(answer.pinproxyError ?? "") \(answer.body)")
        }
        // One connection carried them all, beside the download.
        let connections = Set(TextFile.read(dir.file("nginx/access.log")).split(separator: "\n")
            .filter { $0.contains("/fast-") }.map { $0.split(separator: " ")[0] })
        #expect(connections.count == 1, "\(connections)")
        #expect(slow.isRunning, "the download was still holding its stream")
    }
}
