import Foundation
import Logging
import PinproxyPolicy

/// Every session of one `spotify:` section, by name.
public final class TokenSessions: Sendable {
    public let sessions: [String: TokenSession]
    /// `spotify.token_timeout`: how long a request waits for a token.
    public let tokenTimeout: Duration

    public init(config: SpotifyConfig, endpoint: any TokenEndpoint, clock: @escaping @Sendable () -> Date = { Date() },
                events: TokenSessionEvents = .none, logger: Logger, shared: (any SharedSessionStore)? = nil) {
        tokenTimeout = config.tokenTimeout
        sessions = config.sessions.mapValues { session in
            TokenSession(config: session, endpoint: endpoint, clock: clock, events: events, logger: logger, shared: shared)
        }
    }

    public func session(named name: String) -> TokenSession? {
        sessions[name]
    }

    /// One line per session that cannot serve, for `/readyz`, e.g.
    /// "spotify session app needs re-authorisation (invalid_grant)". Sorted by name.
    public var readinessDetails: [String] {
        sessions.keys.sorted().compactMap { name in
            let status = sessions[name]!.status
            return status.isHealthy ? nil : "spotify session \(name) \(status)"
        }
    }
}
