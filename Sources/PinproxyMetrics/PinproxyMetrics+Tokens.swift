import Foundation

/// Token sessions and the token swap backend. Session names come from the
/// configuration; token values never reach a metric. `credential` repeats
/// `session` (the credential's configured name, issue 31) so that a
/// dashboard can speak of credentials while older ones keep `session`.
extension PinproxyMetrics {
    /// One token endpoint call for `session`.
    public func tokenRefresh(session: String, result: TokenRefreshResult) {
        counter(.tokenRefreshes, session, session, result.rawValue).increment()
    }

    /// When the access token now cached for `session` expires.
    public func tokenExpiry(session: String, at expiry: Date) {
        gauge(.tokenExpiry, session, session).set(to: Self.seconds(expiry))
    }

    /// When the stored refresh token of `session` was issued (the user's
    /// consent, or the last rotation): refresh tokens expire six months later.
    public func refreshTokenIssued(session: String, at issued: Date) {
        gauge(.refreshTokenIssued, session, session).set(to: Self.seconds(issued))
    }

    /// Whether the session store shared by the replicas answers (docs/contract.md §12).
    public func storeUp(_ up: Bool) {
        gauge(.storeUp).set(to: up ? 1 : 0)
    }

    /// A rotated refresh token of `session` that could not be written to its file.
    public func refreshTokenStoreFailed(session: String) {
        counter(.refreshTokenStoreFailures, session, session).increment()
    }

    /// One `POST /swap` or `POST /refresh` of the token swap backend.
    public func swapRequest(endpoint: SwapEndpoint, result: SwapResult) {
        counter(.swapRequests, endpoint.rawValue, result.rawValue).increment()
    }
}
