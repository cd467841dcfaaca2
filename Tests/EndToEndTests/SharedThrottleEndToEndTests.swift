import Foundation
import PinproxyTestSupport
import Testing

/// An upstream's 429 window shared across replicas through the session
/// store (docs/contract.md §4 `upstream_throttled`, §12): two real replicas,
/// the real PostgreSQL, the mock Web API answering 429 `Retry-After: 30` once.
@Suite("Upstream 429 windows shared across replicas", .blockingWaits, .serialized, .enabled(if: PostgresServer.unavailableReason == nil))
struct SharedThrottleEndToEndTests {
    static let heard = "through another replica"

    @Test func a429SeenByOneReplicaHoldsTheOthersBackToo() async throws {
        let cluster = try await SessionStoreCluster(replicas: 2)
        #expect(try cluster.get(0).status == 200)
        #expect(try cluster.get(1).status == 200)
        cluster.api.update {
            $0.rateLimitNext = 1
            $0.retryAfter = 30
        }
        let first = try cluster.get(0)
        #expect(first.status == 429)
        #expect(first.headers["x-pinproxy-error"] == nil, "the upstream's own 429 reaches the app")

        // Replica 1 hears of the window through the store, then holds back without asking the upstream.
        _ = try cluster.replicas[1].process.waitForOutput(timeout: 20) { $0.contains(Self.heard) ? true : nil }
        let seen = cluster.api.seen.count
        let held = try cluster.get(1)
        #expect(held.status == 429)
        #expect(held.headers["x-pinproxy-error"] == "upstream_throttled", "\(held.body)")
        #expect((Int(held.headers["retry-after"] ?? "") ?? 0) > 10, "the window's remaining seconds: \(held.headers)")
        #expect(cluster.api.seen.count == seen, "the upstream saw nothing from the held replica")
        // Another credential through the same replica is not held back.
        #expect(try cluster.get(1, host: "apps.spotify.test").status == 200)

        // A replica that starts while the window is open reads it from the store.
        try cluster.start(1)
        _ = try cluster.replicas[2].process.waitForOutput(timeout: 20) { $0.contains(Self.heard) ? true : nil }
        let late = try cluster.get(2)
        #expect(late.headers["x-pinproxy-error"] == "upstream_throttled", "\(late.status) \(late.body)")
        #expect(cluster.api.seen.count == seen + 1)
    }
}
