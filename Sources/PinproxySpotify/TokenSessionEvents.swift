import Foundation

/// `token_refreshes_total{result}` values (docs/contract.md §10). Named apart from
/// `PinproxyMetrics.TokenRefreshResult` so a module importing both compiles;
/// the raw values are the same, so `TokenRefreshResult(rawValue:)` maps them.
public enum TokenRefreshOutcome: String, Sendable, Hashable, CaseIterable {
    case success
    case failure
    case rateLimited = "rate_limited"
    case invalidClient = "invalid_client"
    case invalidGrant = "invalid_grant"
}

/// Hooks a session calls as things happen; the proxy maps them to metrics.
/// Called synchronously on the refreshing task: keep them quick.
public struct TokenSessionEvents: Sendable {
    /// One answer (or failure to answer) of the token endpoint.
    public var refreshed: @Sendable (_ session: String, _ result: TokenRefreshOutcome) -> Void
    /// A new access token is cached; it expires at the given time.
    public var tokenExpiry: @Sendable (_ session: String, _ expiresAt: Date) -> Void
    /// When the stored refresh token was issued: its file's mtime when first
    /// read (or re-read after an outside change), the rotation time when the
    /// accounts service sent a new one. Refresh tokens die six months after consent.
    public var refreshTokenIssued: @Sendable (_ session: String, _ issuedAt: Date) -> Void
    /// A rotated refresh token could not be written to its file (disk full,
    /// read-only): it is kept in memory, and the file holds a revoked one.
    public var refreshTokenStoreFailed: @Sendable (_ session: String) -> Void

    public init(
        refreshed: @escaping @Sendable (_ session: String, _ result: TokenRefreshOutcome) -> Void = { _, _ in },
        tokenExpiry: @escaping @Sendable (_ session: String, _ expiresAt: Date) -> Void = { _, _ in },
        refreshTokenIssued: @escaping @Sendable (_ session: String, _ issuedAt: Date) -> Void = { _, _ in },
        refreshTokenStoreFailed: @escaping @Sendable (_ session: String) -> Void = { _ in }
    ) {
        self.refreshed = refreshed
        self.tokenExpiry = tokenExpiry
        self.refreshTokenIssued = refreshTokenIssued
        self.refreshTokenStoreFailed = refreshTokenStoreFailed
    }

    public static let none = TokenSessionEvents()
}
