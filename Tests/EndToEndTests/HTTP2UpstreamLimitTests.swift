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
    /// nginx over HTTP/2 allowing `streams` at once and serving `locations`,
    /// as `host`'s upstream behind pinproxy with `max_upstream_connections: 1`.
    static func oneConnection(to host: String, streams: Int, queueTimeout: String, in dir: TemporaryDirectory,
                              serving locations: String) throws -> (NginxServer, ProxyHarness) {
        let pki = try TestPKI.make(in: dir, names: [host])
        let nginx = try NginxServer(in: dir, chain: pki.chainFile, key: pki.leafKey, http: "  http2_max_concurrent_streams \(streams);",
                                    server: locations)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: \(host)
                upstream: 127.0.0.1:\(nginx.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                max_upstream_connections: 1
                queue_timeout: \(queueTimeout)
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        return (nginx, proxy)
    }

    @Test func aBusyH2ConnectionCarriesRequestsFromEveryLoop() async throws {
        let dir = try TemporaryDirectory("pinproxy-h2-limit")
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        // 8 MiB at 256 KiB/s: the download holds its stream for about 30 s (cut at 20 s).
        try dir.write("www/big", String(repeating: "x", count: 8 << 20))
        let (nginx, proxy) = try Self.oneConnection(to: "limit.test", streams: 8, queueTimeout: "2s", in: dir, serving: """
                location /big { root \(dir.file("www")); limit_rate 256k; }
                location / { return 200 "fast\\n"; }
            """)
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

    /// A session keeps the room of its ended stream for its next request
    /// (docs/contract.md §6); at `max_upstream_connections: 1` towards a
    /// server that allows one stream, another app's request takes that room
    /// rather than wait out `queue_timeout` (1 s) for a 503, and the first
    /// app's next request gets a stream again. Python's `http.client` is
    /// each app (HTTP/1.1 in its session; the upstream leg is h2).
    @Test func roomASessionKeepsIsTakenByAnotherAppAtTheLimit() async throws {
        let dir = try TemporaryDirectory("pinproxy-h2-room")
        let (nginx, proxy) = try Self.oneConnection(to: "room.test", streams: 1, queueTimeout: "1s", in: dir, serving: """
                location / { return 200 "room\\n"; }
            """)
        let apps = try AppsInTurn.answers(host: "room.test", paths: ["/room-1", "/room-2", "/room-3"],
                                          proxyPort: proxy.port, caFile: proxy.caFile, in: dir)
        #expect(apps.status == 0, "\(apps.output)")
        #expect(apps.answers == ["200 -", "200 -", "200 -"], "\(apps.output)")
        // One h2 connection carried all three, one stream after another.
        let lines = nginx.accessLog.filter { $0.contains("/room-") }
        #expect(lines.count == 3 && lines.allSatisfy { $0.contains("HTTP/2.0") }, "\(lines)")
        #expect(Set(lines.map { $0.split(separator: " ")[0] }).count == 1, "\(lines)")
    }
}
