import Foundation
import PinproxyPolicy

/// One session's row in the store the replicas share (docs/contract.md §12), as
/// this module sees it: decrypted, in `Secret`s so that printing it shows no token.
public struct StoredSession: Sendable, Equatable {
    /// +1 for every token written; 0 for a row nobody has written a token to yet.
    public var generation: Int
    public var accessToken: Secret?
    /// When the access token was requested (its lifetime counts from here).
    public var accessObtainedAt: Date?
    public var accessExpiresAt: Date?
    /// Flow `refresh_token` only.
    public var refreshToken: Secret?
    public var refreshTokenIssuedAt: Date?
    /// A generation an upstream 401 invalidated (0: none). When it equals
    /// `generation`, the stored access token must not be used.
    public var staleGeneration: Int

    public init(generation: Int = 0, accessToken: Secret? = nil, accessObtainedAt: Date? = nil, accessExpiresAt: Date? = nil,
                refreshToken: Secret? = nil, refreshTokenIssuedAt: Date? = nil, staleGeneration: Int = 0) {
        self.generation = generation
        self.accessToken = accessToken
        self.accessObtainedAt = accessObtainedAt
        self.accessExpiresAt = accessExpiresAt
        self.refreshToken = refreshToken
        self.refreshTokenIssuedAt = refreshTokenIssuedAt
        self.staleGeneration = staleGeneration
    }
}

/// Where the replicas of one pinproxy keep their sessions. Declared here and
/// implemented by `PinproxySessionStore` (PostgreSQL), so this module knows
/// nothing of the database. Every method throws when the store cannot be reached.
public protocol SharedSessionStore: Sendable {
    /// The session's row without locking it; nil when there is none.
    func load(session: String) async throws -> StoredSession?

    /// Runs `body` inside one transaction that holds the lock on the session's
    /// row (created empty when missing): concurrent callers, in this process
    /// or another, run one after the other. `body` returns the row to write
    /// (nil: leave it) and a result; the write is committed before this returns.
    func withLockedSession<Result: Sendable>(
        session: String,
        _ body: @escaping @Sendable (StoredSession) async -> (write: StoredSession?, result: Result)
    ) async throws -> Result

    /// Whether the last contact with the store succeeded (`pinproxy_store_up`).
    var isUp: Bool { get }
}
