/// What `/readyz` says about one session. Reasons are this module's own
/// words and error codes; never a token, a secret or accounts' message text.
public enum TokenSessionStatus: Sendable, Equatable, CustomStringConvertible {
    /// No token requested yet (sessions fetch lazily, at the first request).
    case noTokenYet
    /// A valid token is cached.
    case ok
    /// No valid token; the last refresh failed transiently and is retried with backoff.
    case unavailable(reason: String)
    /// `invalid_client`, an unreadable secret, or another OAuth configuration error.
    case misconfigured(reason: String)
    /// `invalid_grant`, or no refresh token stored: run `pinproxy spotify login`.
    /// A still-valid cached token keeps serving meanwhile.
    case needsReauthorization(reason: String)

    /// True when the session can serve (`ok`) or has not been asked yet.
    public var isHealthy: Bool {
        switch self {
        case .noTokenYet, .ok: return true
        case .unavailable, .misconfigured, .needsReauthorization: return false
        }
    }

    public var description: String {
        switch self {
        case .noTokenYet: return "no token yet"
        case .ok: return "ok"
        case .unavailable(let reason): return "token unavailable (\(reason))"
        case .misconfigured(let reason): return "misconfigured (\(reason))"
        case .needsReauthorization(let reason): return "needs re-authorisation (\(reason))"
        }
    }
}
