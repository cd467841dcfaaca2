import Foundation

/// Why `TokenSession.token(timeout:)` gave no token. Cases carry reasons
/// written by this module (error codes, file paths), never a token, a secret
/// or text from the accounts service's body. The proxy answers every one
/// with 503 `token_unavailable` (docs/contract.md §4).
public enum TokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No valid token arrived within the caller's timeout (accounts down,
    /// failing or slow; a refresh may still be under way or backing off).
    case timedOut
    /// The accounts service rejected the client id or secret (`invalid_client`):
    /// a configuration error, not retried until the secret changes or a minute passes.
    case invalidClient
    /// Another configuration problem: an unreadable secret file, or an OAuth
    /// error such as `unsupported_grant_type` or `unauthorized_client`.
    case misconfigured(reason: String)
    /// The refresh token was refused (`invalid_grant`) or none is stored:
    /// someone must run `pinproxy spotify login` for this session.
    case needsReauthorization(reason: String)
    /// The accounts service asked not to be called (429 `Retry-After`) until
    /// after the caller's timeout would have run out.
    case rateLimited(until: Date)

    public var description: String {
        switch self {
        case .timedOut: return "no token within the timeout"
        case .invalidClient: return "the token endpoint rejected the client credentials (invalid_client)"
        case .misconfigured(let reason): return "misconfigured: \(reason)"
        case .needsReauthorization(let reason): return "needs re-authorisation: \(reason)"
        case .rateLimited(let until): return "the token endpoint is rate limiting token requests until \(until.formatted(.iso8601))"
        }
    }
}
