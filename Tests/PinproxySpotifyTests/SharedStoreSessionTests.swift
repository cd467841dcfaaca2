import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

/// A `SharedSessionStore` in memory: rows, a row lock callers queue on, and a
/// switch that makes it unreachable. The PostgreSQL store is tested end to end.
final class InMemorySharedStore: SharedSessionStore, Sendable {
    let rows = NIOLockedValueBox<[String: StoredSession]>([:])
    let down = NIOLockedValueBox(false)
    /// The next locked call runs its body, then fails instead of committing.
    let failNextCommit = NIOLockedValueBox(false)
    private let mutex = AsyncMutex()

    struct Unreachable: Error {}

    var isUp: Bool { !down.withLockedValue { $0 } }

    func load(session: String) async throws -> StoredSession? {
        if down.withLockedValue({ $0 }) { throw Unreachable() }
        return rows.withLockedValue { $0[session] }
    }

    func withLockedSession<Result: Sendable>(
        session: String, _ body: @escaping @Sendable (StoredSession) async -> (write: StoredSession?, result: Result)
    ) async throws -> Result {
        if down.withLockedValue({ $0 }) { throw Unreachable() }
        await mutex.lock()
        let row = rows.withLockedValue { $0[session] } ?? StoredSession()
        let (write, result) = await body(row)
        let fail = failNextCommit.withLockedValue { fail in defer { fail = false }; return fail }
        if let write, !fail { rows.withLockedValue { $0[session] = write } }
        await mutex.unlock()
        if fail { throw Unreachable() }
        return result
    }

    actor AsyncMutex {
        private var locked = false
        private var waiters: [CheckedContinuation<Void, Never>] = []

        func lock() async {
            guard locked else {
                locked = true
                return
            }
            await withCheckedContinuation { waiters.append($0) }
        }

        func unlock() {
            if waiters.isEmpty { locked = false } else { waiters.removeFirst().resume() }
        }
    }
}

@Suite("Token sessions sharing a store")
struct SharedStoreSessionTests {
    let clock = TestClock()
    let logs = LogCapture()

    /// Two replicas' sessions of the same name over one store and one accounts service.
    func replicas(_ count: Int, _ config: SpotifySession, endpoint: FakeTokenEndpoint, store: InMemorySharedStore) -> [TokenSession] {
        (0..<count).map { _ in
            TokenSession(config: config, endpoint: endpoint, clock: clock.function, logger: logs.logger, shared: store)
        }
    }

    static func tokens(_ sessions: [TokenSession], each: Int) async throws -> [String] {
        try await withThrowingTaskGroup(of: String.self) { group in
            for session in sessions {
                for _ in 0..<each { group.addTask { try await session.token(timeout: .seconds(20)).reveal() } }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test func replicasMakeOneCallPerExpiryAndNeverReuseARotatedToken() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "seed-refresh\n")
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 3600, rotate: true), delay: .milliseconds(50))
        let store = InMemorySharedStore()
        let sessions = replicas(3, session(.refreshToken, refreshTokenFile: file), endpoint: endpoint, store: store)

        #expect(Set(try await Self.tokens(sessions, each: 10)) == ["access-1"])
        #expect(endpoint.callCount == 1)
        for round in 2...4 {
            clock.advance(by: 3400)  // past the soft deadline (refresh_before 5m), still valid
            _ = try await Self.tokens(sessions, each: 3)
            #expect(try await pollUntil { Set(try await Self.tokens(sessions, each: 1)) == ["access-\(round)"] })
            #expect(endpoint.callCount == round, "one call per expiry for all three replicas")
        }
        // Each call presented the refresh token the previous one rotated in: none superseded.
        #expect(endpoint.calls.map { $0.field("refresh_token") } == ["seed-refresh", "refresh-1", "refresh-2", "refresh-3"])
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "seed-refresh\n", "the file is not written back")
        #expect(store.rows.withLockedValue { $0["app"]?.generation } == 4)
    }

    @Test func aReplicaStartingUpUsesAValidStoredTokenWithoutACall() async throws {
        let store = InMemorySharedStore()
        store.rows.withLockedValue {
            $0["app"] = StoredSession(generation: 7, accessToken: Secret("stored-access"), accessObtainedAt: clock.now,
                                      accessExpiresAt: clock.now.addingTimeInterval(3600))
        }
        let endpoint = FakeTokenEndpoint(clock: clock)
        let fresh = replicas(1, session(), endpoint: endpoint, store: store)[0]
        #expect(try await fresh.token(timeout: .seconds(20)).reveal() == "stored-access")
        #expect(endpoint.callCount == 0)
    }

    @Test func a401InvalidatesTheGenerationForEveryReplica() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        let store = InMemorySharedStore()
        let sessions = replicas(2, session(), endpoint: endpoint, store: store)
        let first = try await sessions[0].token(timeout: .seconds(20))
        #expect(try await sessions[1].token(timeout: .seconds(20)).reveal() == first.reveal())
        sessions[0].invalidate(generation: first.generation)
        #expect(try await sessions[0].token(timeout: .seconds(20)).reveal() == "access-2")
        let held = try await sessions[1].token(timeout: .seconds(20))
        sessions[1].invalidate(generation: held.generation)
        #expect(try await sessions[1].token(timeout: .seconds(20)).reveal() == "access-2")
        #expect(endpoint.callCount == 2)
    }

    @Test func anUnreachableStoreStopsRefreshTokenSessionsButNotClientCredentials() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "seed-refresh\n")
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600, rotate: true))
        let store = InMemorySharedStore()
        let user = replicas(1, session(.refreshToken, refreshTokenFile: file), endpoint: endpoint, store: store)[0]
        #expect(try await user.token(timeout: .seconds(20)).reveal() == "access-1")
        store.down.withLockedValue { $0 = true }
        #expect(try await user.token(timeout: .seconds(20)).reveal() == "access-1", "the cached token serves while valid")
        clock.advance(by: 601)
        await #expect(throws: TokenError.timedOut) { try await user.token(timeout: .milliseconds(500)) }
        #expect(endpoint.callCount == 1, "no refresh_token call without the store")
        #expect(!user.status.isHealthy)

        let app = replicas(1, session(), endpoint: endpoint, store: store)[0]
        #expect(try await app.token(timeout: .seconds(20)).reveal() == "access-2", "client_credentials fetches its own")
        #expect(store.rows.withLockedValue { $0["app"]?.generation } == 1, "nothing written while the store was down")

        store.down.withLockedValue { $0 = false }
        #expect(try await pollUntil { (try? await user.token(timeout: .seconds(1)).reveal()) == "access-3" })
        #expect(endpoint.calls.last?.field("refresh_token") == "refresh-1")
    }
    @Test func aGrantTheStoreFailedToCommitIsWrittenAtTheNextRefresh() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "seed-refresh\n")
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 3600, rotate: true))
        let store = InMemorySharedStore()
        let user = replicas(1, session(.refreshToken, refreshTokenFile: file), endpoint: endpoint, store: store)[0]
        #expect(try await user.token(timeout: .seconds(20)).reveal() == "access-1")

        store.failNextCommit.withLockedValue { $0 = true }
        clock.advance(by: 3400)
        _ = try await user.token(timeout: .seconds(20))
        #expect(try await pollUntil { (try await user.token(timeout: .seconds(20))).reveal() == "access-2" },
                "the uncommitted grant serves on this replica")
        #expect(store.rows.withLockedValue { $0["app"]?.generation } == 1)

        clock.advance(by: 3400)
        _ = try await user.token(timeout: .seconds(20))
        #expect(try await pollUntil { (try await user.token(timeout: .seconds(20))).reveal() == "access-3" })
        // refresh-2 came with the uncommitted grant; sending refresh-1 again would be a superseded token.
        #expect(endpoint.calls.map { $0.field("refresh_token") } == ["seed-refresh", "refresh-1", "refresh-2"])
        #expect(store.rows.withLockedValue { $0["app"]?.refreshToken } == Secret("refresh-3"))
        #expect(store.rows.withLockedValue { $0["app"]?.generation } == 3)
    }
}
