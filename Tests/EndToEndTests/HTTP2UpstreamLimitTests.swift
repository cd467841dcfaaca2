import Foundation
import PinproxyTestSupport
import Testing

/// `max_upstream_connections: 1` towards an h2 upstream that allows 8
/// streams (docs/contract.md §11): while a slow download holds one stream,
/// requests from other app connections (on either of pinproxy's event
/// loops) get streams on the same connection, not 503 `queue_timeout`.
/// nginx (`http2`, `http2_max_concurrent_streams 8`, `limit_rate`) is the
/// upstream; curl is the app.
@Suite("HTTP/2 upstream at its connection limit", .blockingWaits, .serialized)
struct HTTP2UpstreamLimitTests {
    @Test func aBusyH2ConnectionCarriesRequestsFromEveryLoop() async throws {
        let dir = try TemporaryDirectory("pinproxy-h2-limit")
        let pki = try TestPKI.make(in: dir, names: ["limit.test"])
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        // 8 MiB at 256 KiB/s: the download holds its stream for about 30 s (cut at 20 s).
        try dir.write("www/big", String(repeating: "x", count: 8 << 20))
        let nginx = try NginxServer(in: dir, chain: pki.chainFile, key: pki.leafKey, http: "  http2_max_concurrent_streams 8;", server: """
                location /big { root \(dir.file("www")); limit_rate 256k; }
                location / { return 200 "fast\\n"; }
            """)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: limit.test
                upstream: 127.0.0.1:\(nginx.port)
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
        #expect(try await pollUntil(timeout: 10) {
            try ChildProcess.run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).output
                .contains(#"pinproxy_upstream_streams{host="limit.test"} 1"#)
        }, "\(slow.outputText) \(nginx.accessLog)")
        // Each curl is a new app connection; pinproxy accepts them on its loops in turn.
        for index in 0..<4 {
            let answer = try Curl.run("https://limit.test/fast-\(index)", proxy: proxy, directory: dir)
            #expect(answer.status == 200, "request \(index): \(answer.status) \(answer.pinproxyError ?? "") \(answer.body)")
        }
        // One connection carried them all, beside the download.
        let connections = Set(nginx.accessLog
            .filter { $0.contains("/fast-") }.map { $0.split(separator: " ")[0] })
        #expect(connections.count == 1, "\(connections)")
        #expect(slow.isRunning, "the download was still holding its stream")
        // Each ended stream left the gauge as it closed: the download's alone
        // is open, and once its app goes, none.
        let streams = { try ChildProcess.run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).output }
        #expect(try await pollUntil(timeout: 10) { try streams().contains(#"pinproxy_upstream_streams{host="limit.test"} 1"#) })
        slow.stop()
        let closed = try await pollUntil(timeout: 10) { try streams().contains(#"pinproxy_upstream_streams{host="limit.test"} 0"#) }
        let gauge = try streams().split(separator: "\n").filter { $0.hasPrefix("pinproxy_upstream_streams") }
        #expect(closed, "\(gauge)")
    }
}
