import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxySpotify
import PinproxyTestSupport
import PinproxyTLS
import Testing
@testable import PinproxySessionStore

/// `PostgresSessionStore` against a real PostgreSQL 15 started here (docs/contract.md §12).
@Suite("PostgreSQL session store", .blockingWaits, .serialized, .enabled(if: PostgresServer.unavailableReason == nil))
struct PostgresSessionStoreTests {
    static let key = Secret(Base64.encode((0..<32).map { _ in UInt8.random(in: 0...255) }))

    static func config(_ postgres: PostgresServer) -> SpotifyStoreConfig {
        SpotifyStoreConfig(url: postgres.url, host: "127.0.0.1", port: postgres.port, user: postgres.user, database: postgres.database,
                           password: .inline(Secret(postgres.password)), tls: .disable, keyFile: "(test)", key: key)
    }

    final class Lines: Sendable {
        let lines = NIOLockedValueBox<[String]>([])
        var logger: Logger {
            let lines = self.lines
            var logger = Logger(label: "store-test") { _ in Handler(lines: lines) }
            logger.logLevel = .info
            return logger
        }
        var all: [String] { lines.withLockedValue { $0 } }

        struct Handler: LogHandler {
            let lines: NIOLockedValueBox<[String]>
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .info
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) { lines.withLockedValue { $0.append("\(event.message)") } }
        }
    }

    /// Runs `count` stores (as `count` replicas would) until `body` returns.
    static func withStores<T>(_ count: Int, _ postgres: PostgresServer, logs: Lines,
                              _ body: ([PostgresSessionStore]) async throws -> T) async throws -> T {
        let stores = try (0..<count).map { _ in try PostgresSessionStore(config: config(postgres), logger: logs.logger) }
        let tasks = stores.map { store in Task { try await store.run() } }
        defer { tasks.forEach { $0.cancel() } }
        for store in stores {
            let up = await pollUntil { store.isUp }
            #expect(up, "store reached PostgreSQL: \(logs.all)")
        }
        return try await body(stores)
    }

    @Test func threeStoresStartingAtOnceCreateTheTableOnce() async throws {
        let postgres = try PostgresServer()
        let logs = Lines()
        try await Self.withStores(3, postgres, logs: logs) { _ in
            #expect(logs.all.filter { $0 == "created the session store table" }.count == 1, "\(logs.all)")
            #expect(!logs.all.contains { $0.contains("unreachable") }, "\(logs.all)")
        }
        let tables = try postgres.psql("SELECT count(*) FROM pg_class WHERE relname = 'pinproxy_spotify_sessions'")
        #expect(tables.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test func lockedSessionsRunOneAtATimeAcrossStores() async throws {
        let postgres = try PostgresServer()
        let logs = Lines()
        let inside = NIOLockedValueBox((now: 0, most: 0))
        try await Self.withStores(2, postgres, logs: logs) { stores in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        try await stores[index % 2].withLockedSession(session: "app") { row -> (write: StoredSession?, result: Void) in
                            inside.withLockedValue { $0.now += 1; $0.most = max($0.most, $0.now) }
                            // Holds the lock a moment (work, not a wait): a second holder would overlap it.
                            try? await Task.sleep(for: .milliseconds(30))
                            inside.withLockedValue { $0.now -= 1 }
                            var next = row
                            next.generation += 1
                            return (next, ())
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(inside.withLockedValue { $0.most } == 1, "two callers held the row lock at once")
            #expect(try await stores[0].load(session: "app")?.generation == 10, "no update was lost")
        }
    }

    @Test func tokensAreSealedAtRestAndOpenAgain() async throws {
        let postgres = try PostgresServer()
        let logs = Lines()
        let access = "BQD-access-" + UUID().uuidString
        let refresh = "AQB-refresh-" + UUID().uuidString
        let obtained = Date(timeIntervalSince1970: 1_800_000_000)
        try await Self.withStores(1, postgres, logs: logs) { stores in
            try await stores[0].withLockedSession(session: "user") { row -> (write: StoredSession?, result: Void) in
                (StoredSession(generation: 1, accessToken: Secret(access), accessObtainedAt: obtained,
                               accessExpiresAt: obtained.addingTimeInterval(3600), refreshToken: Secret(refresh),
                               refreshTokenIssuedAt: obtained), ())
            }
            let loaded = try #require(try await stores[0].load(session: "user"))
            #expect(loaded.accessToken == Secret(access))
            #expect(loaded.refreshToken == Secret(refresh))
            #expect(loaded.accessExpiresAt == obtained.addingTimeInterval(3600))
        }
        let dump = try postgres.dump()
        #expect(dump.contains("pinproxy_spotify_sessions"))
        #expect(!dump.contains(access) && !dump.contains(refresh))
        let hex = try postgres.psql("SELECT encode(access_token, 'hex') FROM pinproxy_spotify_sessions WHERE session = 'user'")
        #expect(hex.hasPrefix("01"), "version byte first: \(hex)")
    }

    /// Eight connections, all open before any asks, then all creating the
    /// table at the same moment: exactly one creates it and none fails (plain
    /// `CREATE TABLE IF NOT EXISTS` can race on `pg_type`; the advisory lock is why not).
    @Test func simultaneousCreationsMakeTheTableOnceWithoutError() async throws {
        let postgres = try PostgresServer()
        let stores = try (0..<8).map { _ in try PostgresSessionStore(config: Self.config(postgres), logger: Logger(label: "t")) }
        // The pools only: the stores' own probes would create the table first.
        let pools = stores.map { store in Task { await store.client.run() } }
        defer { pools.forEach { $0.cancel() } }
        let barrier = Barrier(count: stores.count)
        let created = try await withThrowingTaskGroup(of: Bool.self) { group in
            for store in stores {
                group.addTask {
                    try await store.client.withConnection { connection in
                        _ = try await connection.query("SELECT 1", logger: Logger(label: "t"))
                        await barrier.arriveAndWait()
                        return try await SessionStoreSchema.ensure(on: connection, logger: Logger(label: "t"))
                    }
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(created.filter { $0 }.count == 1, "\(created)")
    }

    actor Barrier {
        let count: Int
        private var waiting: [CheckedContinuation<Void, Never>] = []
        init(count: Int) { self.count = count }

        func arriveAndWait() async {
            if waiting.count + 1 == count {
                waiting.forEach { $0.resume() }
                waiting = []
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }
    }
}
