import Foundation
import Logging
import PinproxyPolicy
import PinproxySpotify
import PinproxyTestSupport
import Testing
@testable import PinproxySessionStore

/// bench/store.sh: what a request that has to read the store waits, beside one
/// served from memory. Skipped unless PINPROXY_STORE_BENCH=1; 200 rounds each.
@Suite("Store read latency", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["PINPROXY_STORE_BENCH"] == "1" && PostgresServer.unavailableReason == nil))
struct StoreReadLatencyBenchmark {
    struct NoEndpoint: TokenEndpoint {
        struct Called: Error {}
        func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse {
            throw Called()
        }
    }

    static func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
    static func p90(_ values: [Duration]) -> Duration { values.sorted()[values.count * 9 / 10] }

    @Test func medianOf200() async throws {
        let postgres = try PostgresServer()
        let logger = Logger(label: "bench")
        let store = try PostgresSessionStore(config: PostgresSessionStoreTests.config(postgres), logger: logger)
        let task = Task { try await store.run() }
        defer { task.cancel() }
        let deadline = Date().addingTimeInterval(30)
        while !store.isUp, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let now = Date()
        try await store.withLockedSession(session: "app") { _ -> (write: StoredSession?, result: Void) in
            (StoredSession(generation: 1, accessToken: Secret("stored-access"), accessObtainedAt: now,
                           accessExpiresAt: now.addingTimeInterval(3600)), ())
        }
        let config = SpotifySession(name: "app", flow: .clientCredentials, clientID: "id", clientSecret: .inline(Secret("s")),
                                    refreshTokenFile: nil)
        let clock = ContinuousClock()
        var fromStore: [Duration] = []
        var fromMemory: [Duration] = []
        for _ in 0..<200 {
            // A session with nothing cached: its first request reads the store (and finds a valid token).
            let session = TokenSession(config: config, endpoint: NoEndpoint(), logger: logger, shared: store)
            let cold = try await clock.measure { _ = try await session.token(timeout: .seconds(10)) }
            let warm = try await clock.measure { _ = try await session.token(timeout: .seconds(10)) }
            fromStore.append(cold)
            fromMemory.append(warm)
        }
        func ms(_ d: Duration) -> String { String(format: "%.3f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000) }
        print("STORE-BENCH-LATENCY | token from memory | \(ms(Self.median(fromMemory))) | \(ms(Self.p90(fromMemory))) |")
        print("STORE-BENCH-LATENCY | token read from the store | \(ms(Self.median(fromStore))) | \(ms(Self.p90(fromStore))) |")
        print("STORE-BENCH-LATENCY | added by the store read (median difference) | \(ms(Self.median(fromStore) - Self.median(fromMemory))) | |")
    }
}
