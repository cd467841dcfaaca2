import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyAdmin
import PinproxyMetrics
import PinproxyPolicy
import PinproxyServer
import PinproxySpotify
import PinproxyTLS

/// The accounts service's token endpoint, reached through the proxy's own
/// path: the accounts host's policy (pins, TLS floor, SSRF guard, pool)
/// protects the client secret exactly as it protects app traffic.
struct ProxiedTokenEndpoint: TokenEndpoint {
    let proxy: ProxyServer
    let url: String
    let timeout: Duration

    init(proxy: ProxyServer, accounts: String, timeout: Duration) {
        self.proxy = proxy
        self.url = (accounts.hasSuffix("/") ? String(accounts.dropLast()) : accounts) + "/api/token"
        self.timeout = timeout
    }

    func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse {
        var headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")]
        if let basicAuth {
            // RFC 6749 §2.3.1: id and secret are form-encoded, then joined for Basic.
            let pair = FormEncoding.escape(basicAuth.user) + ":" + FormEncoding.escape(basicAuth.password)
            headers.append(("Authorization", "Basic " + Base64.encode(Array(pair.utf8))))
        }
        let body = Array(FormEncoding.encode(form).utf8)
        let response = try await proxy.send(method: "POST", url: url, headers: headers, body: body, timeout: timeout)
        return TokenEndpointResponse(status: response.status, headers: response.headers, body: response.body)
    }
}

/// The proxy's bearer tokens, from the Spotify sessions of the serving
/// config. A reload that adds or changes a session builds it anew; sessions
/// whose config did not change are kept, with their cached tokens.
final class SessionTokenProvider: BearerTokenProvider, Sendable {
    private struct Current {
        var config: SpotifyConfig
        var sessions: [String: (config: SpotifySession, session: TokenSession)]
    }

    private let state: NIOLockedValueBox<Current>
    private let makeEndpoint: @Sendable (SpotifyConfig) -> any TokenEndpoint
    private let events: TokenSessionEvents
    private let logger: Logger
    /// The store the replicas share, made once at start (docs/contract.md §12).
    private let shared: (any SharedSessionStore)?

    init(config: SpotifyConfig, events: TokenSessionEvents, logger: Logger, shared: (any SharedSessionStore)? = nil,
         endpoint: @escaping @Sendable (SpotifyConfig) -> any TokenEndpoint) {
        self.shared = shared
        self.makeEndpoint = endpoint
        self.events = events
        self.logger = logger
        self.state = NIOLockedValueBox(Current(config: config, sessions: [:]))
        update(config)
    }

    /// Takes the `spotify:` section of a newly loaded config.
    func update(_ config: SpotifyConfig) {
        let endpoint = makeEndpoint(config)
        if state.withLockedValue({ $0.config.store != config.store }) {
            logger.warning("spotify.store changed: the store in use stays until pinproxy restarts")
        }
        let accountsChanged = state.withLockedValue { $0.config.accounts != config.accounts || $0.config.tokenTimeout != config.tokenTimeout }
        state.withLockedValue { current in
            var next: [String: (config: SpotifySession, session: TokenSession)] = [:]
            for (name, sessionConfig) in config.sessions {
                if !accountsChanged, let kept = current.sessions[name], kept.config == sessionConfig {
                    next[name] = kept
                } else {
                    next[name] = (sessionConfig, TokenSession(config: sessionConfig, endpoint: endpoint, events: events, logger: logger, shared: shared))
                }
            }
            current = Current(config: config, sessions: next)
        }
    }

    func prefetchAll() {
        state.withLockedValue { $0.sessions.values.map(\.session) }.forEach { $0.prefetch() }
    }

    /// One line per session that cannot serve, for `/readyz`.
    var readinessDetails: [String] {
        state.withLockedValue { current in
            current.sessions.keys.sorted().compactMap { name in
                let status = current.sessions[name]!.session.status
                return status.isHealthy ? nil : "spotify session \(name) \(status)"
            }
        }
    }

    /// Each session's name, flow and state for the status page: no secret.
    var summaries: [SessionSummary] {
        state.withLockedValue { current in
            current.sessions.keys.sorted().map { name in
                let entry = current.sessions[name]!
                return SessionSummary(name: name, flow: entry.config.flow.rawValue, status: entry.session.status)
            }
        }
    }

    func token(session name: String) async throws -> BearerToken {
        let (session, timeout) = state.withLockedValue { ($0.sessions[name]?.session, $0.config.tokenTimeout) }
        guard let session else {
            throw TokenError.misconfigured(reason: "no Spotify session named \(name)")
        }
        let token = try await session.token(timeout: timeout)
        return BearerToken(value: token.reveal(), generation: token.generation)
    }

    func invalidate(session name: String, generation: Int) {
        state.withLockedValue { $0.sessions[name]?.session }?.invalidate(generation: generation)
    }
}

extension TokenSessionEvents {
    /// Session events as metrics (docs/contract.md §6: refreshes, token expiry, refresh-token age).
    static func metrics(_ metrics: PinproxyMetrics) -> TokenSessionEvents {
        TokenSessionEvents(
            refreshed: { session, outcome in
                if let result = TokenRefreshResult(rawValue: outcome.rawValue) { metrics.tokenRefresh(session: session, result: result) }
            },
            tokenExpiry: { session, expiry in metrics.tokenExpiry(session: session, at: expiry) },
            refreshTokenIssued: { session, issued in metrics.refreshTokenIssued(session: session, at: issued) })
    }
}
