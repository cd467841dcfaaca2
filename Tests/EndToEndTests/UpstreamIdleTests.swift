import Foundation
import PinproxyTestSupport
import Testing

/// An idle pooled upstream connection keeps reading: when the server closes
/// it (its keep-alive timeout), pinproxy sees that at once, with no client
/// request to find out, forgets the connection, and the next request dials anew.
@Suite("Idle pooled upstream connections", .blockingWaits, .serialized)
struct UpstreamIdleTests {
    final class Setup: @unchecked Sendable {
        let scenario: Scenario
        var dir: TemporaryDirectory { scenario.dir }
        var upstream: TestUpstream { scenario.upstream }
        var proxy: ProxyHarness { scenario.proxy }
        let admin: String

        init(name: String, limits: String = "") async throws {
            scenario = try await Scenario("pinproxy-idle", names: [name], hosts: [.intercept(name)], mainConfig: limits)
            admin = "http://127.0.0.1:\(try scenario.proxy.adminPort)"
        }

        /// `pinproxy_upstream_connections{host=…}` as /metrics says it now.
        func upstreamConnections(_ host: String) throws -> Double? {
            let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            guard scrape.status == 200 else { throw TestSupportError("GET /metrics: \(scrape.status) \(scrape.stderr)") }
            return try PrometheusText(parsing: scrape.body).value("pinproxy_upstream_connections", ["host": host])
        }

        func get(_ url: String) throws -> CurlResult {
            try Curl.run(url, proxy: proxy, directory: dir)
        }
    }

    /// One request through pinproxy leaves one idle upstream connection in its pool.
    func primed(_ name: String, limits: String = "") async throws -> Setup {
        let s = try await Setup(name: name, limits: limits)
        let first = try s.get("https://\(name)/echo")
        #expect(first.status == 200, "\(first.stderr)")
        #expect(first.body.contains("\"uri\": \"/echo\""), "\(first.body)")
        // The gauge counts the pooled connection (upstream_connections is pooled or in use).
        #expect(try await pollUntil(timeout: 10) { try s.upstreamConnections(name) == 1 }, "one pooled connection")
        #expect(s.upstream.connections.withLockedValue { $0 } == 1)
        #expect(s.upstream.openConnections == 1)
        return s
    }

    @Test func aServerClosingAnIdlePooledConnectionIsSeenWithoutAnotherRequest() async throws {
        let s = try await primed("idle-close.test")
        let requestsBefore = s.upstream.requests.withLockedValue { $0.count }
        #expect(try s.upstream.closeConnections(.full) == 1)

        // No client request from here until the gauge is back to 0.
        let seen = try await pollUntil(timeout: 10, every: 0.1) { try s.upstreamConnections("idle-close.test") == 0 }
        #expect(seen, "pinproxy_upstream_connections stayed at \(String(describing: try? s.upstreamConnections("idle-close.test")))")
        #expect(s.upstream.requests.withLockedValue { $0.count } == requestsBefore, "nothing reached the upstream meanwhile")

        // The next request finds no stale connection: it dials a fresh one and succeeds.
        let next = try s.get("https://idle-close.test/echo")
        #expect(next.status == 200, "\(next.stderr)")
        #expect(next.pinproxyError == nil)
        #expect(s.upstream.connections.withLockedValue { $0 } == 2, "a second connection was dialled")
        #expect(try await pollUntil(timeout: 10) { try s.upstreamConnections("idle-close.test") == 1 })
    }

    @Test func aCloseNotifyAloneOnAnIdlePooledConnectionIsSeenWithoutAnotherRequest() async throws {
        // The server says close_notify and keeps its TCP end open: no FIN, no
        // RDHUP, so only a connection that keeps reading notices. pinproxy must
        // answer by closing the connection itself.
        let s = try await primed("idle-notify.test")
        #expect(try s.upstream.closeConnections(.closeNotifyOnly) == 1)

        let seen = try await pollUntil(timeout: 10, every: 0.1) { try s.upstreamConnections("idle-notify.test") == 0 }
        #expect(seen, "pinproxy_upstream_connections stayed at \(String(describing: try? s.upstreamConnections("idle-notify.test")))")
        // pinproxy, not the upstream, ended the TCP connection.
        #expect(await pollUntil(timeout: 10) { s.upstream.openConnections == 0 }, "pinproxy never closed the connection")

        let next = try s.get("https://idle-notify.test/echo")
        #expect(next.status == 200, "\(next.stderr)")
        #expect(next.pinproxyError == nil)
        #expect(s.upstream.connections.withLockedValue { $0 } == 2, "a second connection was dialled")
        #expect(s.upstream.requests.withLockedValue { $0 } == ["GET /echo", "GET /echo"])
    }

    /// The pool closes a connection idle for `limits.idle_timeout` by itself
    /// (as Envoy's upstream idle timeout does): before, it stayed open until a
    /// later request found it stale, holding a socket on both sides.
    @Test func aPooledConnectionIdleForIdleTimeoutIsClosedWithoutAnotherRequest() async throws {
        let s = try await primed("idle-timer.test", limits: "limits:\n  idle_timeout: 1s\n")
        #expect(try await pollUntil(timeout: 20) { s.upstream.openConnections == 0 }, "the server still holds the pooled connection")
        #expect(try await pollUntil(timeout: 10) { try s.upstreamConnections("idle-timer.test") == 0 })
        let next = try s.get("https://idle-timer.test/echo")
        #expect(next.status == 200, "\(next.stderr)")
        #expect(s.upstream.connections.withLockedValue { $0 } == 2, "the next request dialled anew")
    }
}
