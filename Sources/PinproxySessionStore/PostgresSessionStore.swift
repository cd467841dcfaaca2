import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxySpotify
import PostgresNIO
import ServiceLifecycle

/// The session store on PostgreSQL (docs/contract.md §12). postgres-nio's
/// `PostgresClient` pools connections and reconnects with backoff; this type
/// runs it as a service, watches whether the database answers
/// (`pinproxy_store_up`), creates the table once, and maps rows to
/// `StoredSession`s through `SessionTokenCipher`.
public final class PostgresSessionStore: SharedSessionStore, Service, Sendable {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    let client: PostgresClient
    let cipher: SessionTokenCipher
    let logger: Logger
    /// How long an operation waits for a connection before the store counts as unreachable.
    let leaseTimeout: Duration
    private let health = NIOLockedValueBox(Health())
    private let onChange: @Sendable (Bool) -> Void
    /// Where the upstream 429 windows other replicas open go (`followThrottleWindows`); nil: not followed.
    let throttleSink = NIOLockedValueBox<(@Sendable ([ThrottleWindow]) -> Void)?>(nil)

    private struct Health {
        var up = false
        var schemaReady = false
        var lastError: String?
    }

    /// - Parameter onChange: called with the new state each time the store goes up or down.
    public init(config: SpotifyStoreConfig, logger: Logger, leaseTimeout: Duration = .seconds(2),
                onChange: @escaping @Sendable (Bool) -> Void = { _ in }) throws {
        self.client = PostgresClient(configuration: try StoreClientConfiguration.make(config), backgroundLogger: logger)
        self.cipher = try SessionTokenCipher(base64Key: config.key)
        self.logger = logger
        self.leaseTimeout = leaseTimeout
        self.onChange = onChange
    }

    public var isUp: Bool { health.withLockedValue { $0.up } }

    /// For `/readyz`: nil while the store answers.
    public var problem: String? {
        health.withLockedValue { $0.up ? nil : ($0.lastError ?? "not reached yet") }
    }

    // MARK: Service

    /// Runs the client's pool and the health probe until shutdown.
    public func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.watch() }
            if let sink = throttleSink.withLockedValue({ $0 }) {
                group.addTask { await self.followThrottleWindows(sink) }
            }
            // The pool stops when its task is cancelled; both stop at graceful shutdown.
            try? await gracefulShutdown()
            group.cancelAll()
        }
    }

    /// Creates the table at the first contact, then asks `SELECT 1` every few
    /// seconds (every second while down), so the gauge and `/readyz` follow
    /// the database even when no session needs it.
    private func watch() async {
        while !Task.isCancelled {
            do {
                try await withLease { connection in
                    try await self.ensureSchema(on: connection)
                    try await connection.query("SELECT 1", logger: self.logger)
                }
                mark(up: true, error: nil)
            } catch {
                mark(up: false, error: "\(error)")
            }
            try? await Task.sleep(for: isUp ? .seconds(3) : .seconds(1))
        }
    }

    func mark(up: Bool, error: String?) {
        let changed = health.withLockedValue { health -> Bool in
            let changed = health.up != up
            health.up = up
            if let error { health.lastError = Self.shortReason(error) }
            return changed
        }
        guard changed else { return }
        if up {
            logger.notice("session store reachable")
        } else {
            logger.warning("session store unreachable", metadata: ["error": "\(error.map(Self.shortReason) ?? "?")"])
        }
        onChange(up)
    }

    /// postgres-nio's errors print the query and more; keep the code's words.
    static func shortReason(_ text: String) -> String {
        String(text.prefix(200))
    }

    // MARK: SharedSessionStore

    public func load(session: String) async throws -> StoredSession? {
        try await withLease { connection in
            try await self.ensureSchema(on: connection)
            let rows = try await connection.query(
                "SELECT \(unescaped: Self.columns) FROM pinproxy_spotify_sessions WHERE session = \(session)", logger: self.logger)
            var found: StoredSession?
            for try await row in rows.decode(Row.self) { found = try self.decode(row, session: session) }
            return found
        }
    }

    public func withLockedSession<Result: Sendable>(
        session: String,
        _ body: @escaping @Sendable (StoredSession) async -> (write: StoredSession?, result: Result)
    ) async throws -> Result {
        try await withLease { connection in
            try await self.ensureSchema(on: connection)
            return try await connection.withTransaction(logger: self.logger) { connection in
                // A replica that dies holding the lock loses its connection, and the lock with it.
                try await connection.query("SET LOCAL lock_timeout = '60s'", logger: self.logger)
                try await connection.query(
                    "INSERT INTO pinproxy_spotify_sessions (session) VALUES (\(session)) ON CONFLICT (session) DO NOTHING",
                    logger: self.logger)
                let rows = try await connection.query(
                    "SELECT \(unescaped: Self.columns) FROM pinproxy_spotify_sessions WHERE session = \(session) FOR UPDATE",
                    logger: self.logger)
                var current = StoredSession()
                for try await row in rows.decode(Row.self) { current = try self.decode(row, session: session) }
                let (write, result) = await body(current)
                if let write { try await self.write(write, session: session, on: connection) }
                return result
            }
        }
    }

    /// The table is made at the first contact, by `watch` or by whichever
    /// operation comes first (`pinproxy spotify login` may beat the probe).
    func ensureSchema(on connection: PostgresConnection) async throws {
        guard !health.withLockedValue({ $0.schemaReady }) else { return }
        if try await SessionStoreSchema.ensure(on: connection, logger: logger) {
            logger.notice("created the session store table", metadata: ["table": "\(SessionStoreSchema.table)"])
        }
        health.withLockedValue { $0.schemaReady = true }
    }

    // MARK: Rows

    static let columns = "generation, access_token, access_obtained_at, access_expires_at, refresh_token, refresh_token_issued_at, stale_generation"
    typealias Row = (Int64, ByteBuffer?, Date?, Date?, ByteBuffer?, Date?, Int64)

    func decode(_ row: Row, session: String) throws -> StoredSession {
        let (generation, access, obtained, expires, refresh, issued, stale) = row
        return StoredSession(
            generation: Int(generation),
            accessToken: try access.map { try cipher.open(Array(buffer: $0), session: session, field: .access) },
            accessObtainedAt: obtained, accessExpiresAt: expires,
            refreshToken: try refresh.map { try cipher.open(Array(buffer: $0), session: session, field: .refresh) },
            refreshTokenIssuedAt: issued, staleGeneration: Int(stale))
    }

    private func write(_ row: StoredSession, session: String, on connection: PostgresConnection) async throws {
        let access = row.accessToken.map { ByteBuffer(bytes: cipher.seal($0, session: session, field: .access)) }
        let refresh = row.refreshToken.map { ByteBuffer(bytes: cipher.seal($0, session: session, field: .refresh)) }
        try await connection.query("""
            UPDATE pinproxy_spotify_sessions SET generation = \(Int64(row.generation)), access_token = \(access),
                access_obtained_at = \(row.accessObtainedAt), access_expires_at = \(row.accessExpiresAt),
                refresh_token = \(refresh), refresh_token_issued_at = \(row.refreshTokenIssuedAt),
                stale_generation = \(Int64(row.staleGeneration)), updated_at = now()
            WHERE session = \(session)
            """, logger: logger)
    }

    // MARK: Leasing

    private enum Gate { case waiting, leased, timedOut }

    /// A pooled connection for `body`, or `Unavailable` when none comes within
    /// `leaseTimeout` (while the database is down the pool keeps retrying in
    /// the background and would otherwise queue the request for a minute).
    /// Only the wait is bounded: once `body` runs, it is not cancelled.
    func withLease<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let gate = NIOLockedValueBox(Gate.waiting)
        let client = self.client
        let work = Task { () throws -> T in
            try await client.withConnection { connection in
                let go = gate.withLockedValue { gate -> Bool in
                    guard gate == .waiting else { return false }
                    gate = .leased
                    return true
                }
                guard go else { throw Unavailable(description: "no connection to the session store within the timeout") }
                return try await body(connection)
            }
        }
        let timeout = leaseTimeout
        let timer = Task {
            try? await Task.sleep(for: timeout)
            let expired = gate.withLockedValue { gate -> Bool in
                guard gate == .waiting else { return false }
                gate = .timedOut
                return true
            }
            if expired { work.cancel() }
        }
        defer { timer.cancel() }
        do {
            let value = try await work.value
            mark(up: true, error: nil)
            return value
        } catch {
            if gate.withLockedValue({ $0 }) == .timedOut {
                mark(up: false, error: "no connection to the session store within \(timeout)")
                throw Unavailable(description: "no connection to the session store within \(timeout)")
            }
            // A token that does not open is the key's problem, not the database's.
            if !(error is Unavailable), !(error is SessionTokenCipher.OpenError) { mark(up: false, error: "\(error)") }
            throw error
        }
    }
}
