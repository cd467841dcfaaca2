import Foundation
import PinproxyTestSupport
import Testing

/// bench/store.sh: token calls per refresh interval for N replicas, with and
/// without the session store (docs/contract.md §12). Counted, not estimated:
/// MockAccounts counts every token request. Skipped unless
/// PINPROXY_STORE_BENCH=1 (bench/store.sh sets it); bounded in time.
@Suite("Session store token-call count", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["PINPROXY_STORE_BENCH"] == "1" && PostgresServer.unavailableReason == nil))
struct SessionStoreBenchmark {
    /// Token lifetime 4 s, refresh_before 1 s: every session is refreshed every 3 s
    /// (the same 55-of-60 shape as Spotify's 1 h tokens with the default 5m, scaled down).
    static let lifetime = 4
    static let interval: TimeInterval = 3
    static let intervals = Int(ProcessInfo.processInfo.environment["PINPROXY_STORE_BENCH_INTERVALS"] ?? "") ?? 6

    @Test(arguments: [1, 3, 10])
    func tokenCallsPerInterval(replicas: Int) async throws {
        var lines: [String] = []
        for store in [false, true] {
            let cluster = try await SessionStoreCluster(replicas: replicas, store: store) {
                $0.update { $0.rotateRefreshTokens = true; $0.expiresIn = Self.lifetime }
            }
            // Warm-up: every replica has served both sessions once.
            for index in 0..<replicas {
                _ = try cluster.get(index)
                _ = try cluster.get(index, host: "apps.spotify.test")
            }
            let before = cluster.accounts.counters
            let started = Date()
            var requests = 0
            var failed = 0
            // Steady requests: round-robin over replicas and both sessions, for K intervals.
            while Date().timeIntervalSince(started) < Self.interval * Double(Self.intervals) {
                for index in 0..<replicas {
                    for host in ["api.spotify.test", "apps.spotify.test"] {
                        requests += 1
                        if try cluster.get(index, host: host).status != 200 { failed += 1 }
                    }
                }
            }
            let elapsed = Date().timeIntervalSince(started)
            let after = cluster.accounts.counters
            let measured = elapsed / Self.interval
            func perInterval(_ grant: String) -> String {
                let calls = (after.byGrantType[grant] ?? 0) - (before.byGrantType[grant] ?? 0)
                return "\(calls) (\(String(format: "%.2f", Double(calls) / measured)))"
            }
            let superseded = after.supersededRefreshTokens - before.supersededRefreshTokens
            let line = "| \(replicas) | \(store ? "yes" : "no") | \(String(format: "%.1f", elapsed)) s = \(String(format: "%.2f", measured)) | "
                + "\(perInterval("client_credentials")) | \(perInterval("refresh_token")) | \(superseded) | \(failed) of \(requests) |"
            lines.append(line)
        }
        print("STORE-BENCH-CALLS " + lines.joined(separator: "\nSTORE-BENCH-CALLS "))
    }
}
