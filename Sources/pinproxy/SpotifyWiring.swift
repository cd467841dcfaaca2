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
        self.init(proxy: proxy, url: (accounts.hasSuffix("/") ? String(accounts.dropLast()) : accounts) + "/api/token", timeout: timeout)
    }

    /// A `credentials:` entry's `token_url`, as written.
    init(proxy: ProxyServer, url: String, timeout: Duration) {
        self.proxy = proxy
        self.url = url
        self.timeout = timeout
    }

    /// The endpoint of `session`: its own `token_url`, or Spotify's (the preset).
    static func of(_ session: SpotifySession, spotify: SpotifyConfig, proxy: ProxyServer) -> ProxiedTokenEndpoint {
        if let url = session.tokenURL { return ProxiedTokenEndpoint(proxy: proxy, url: url, timeout: spotify.tokenTimeout) }
        return ProxiedTokenEndpoint(proxy: proxy, accounts: spotify.accounts, timeout: spotify.tokenTimeout)
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

/// The proxy's credentials, from the serving config: the token sessions of
/// `spotify.sessions` and of `credentials:` entries of `kind: oauth2` (one
/// machinery), and the values of `kind: static` entries. A reload that adds
/// or changes a session builds it anew; sessions whose config did not change
/// are kept, with their cached tokens; static values are read again.
final class SessionTokenProvider: BearerTokenProvider, Sendable {
    private struct Current {
        var config: SpotifyConfig
        var sessions: [String: (config: SpotifySession, session: TokenSession)]
        var statics: [String: Result<Secret, TokenError>]
    }

    private let state: NIOLockedValueBox<Current>
    private let makeEndpoint: @Sendable (SpotifyConfig, SpotifySession) -> any TokenEndpoint
    private let events: TokenSessionEvents
    private let logger: Logger
    /// The store the replicas share, made once at start (docs/contract.md §12).
    private let shared: (any SharedSessionStore)?

    init(config: SpotifyConfig, credentials: CredentialsConfig = .none, events: TokenSessionEvents, logger: Logger,
         shared: (any SharedSessionStore)? = nil, endpoint: @escaping @Sendable (SpotifyConfig, SpotifySession) -> any TokenEndpoint) {
        self.shared = shared
        self.makeEndpoint = endpoint
        self.events = events
        self.logger = logger
        self.state = NIOLockedValueBox(Current(config: config, sessions: [:], statics: [:]))
        update(config, credentials: credentials)
    }

    /// Takes the `spotify:` and `credentials:` sections of a newly loaded config.
    func update(_ config: SpotifyConfig, credentials: CredentialsConfig = .none) {
        if state.withLockedValue({ $0.config.store != config.store }) {
            logger.warning("spotify.store changed: the store in use stays until pinproxy restarts")
        }
        let accountsChanged = state.withLockedValue { $0.config.accounts != config.accounts || $0.config.tokenTimeout != config.tokenTimeout }
        let statics = credentials.statics.mapValues(StaticCredentialValue.read)
        for (name, value) in statics.sorted(by: { $0.key < $1.key }) {
            if case .failure(let error) = value { logger.error("credential \(name) has no value: \(error)") }
        }
        let all = config.sessions.merging(credentials.oauth2) { spotify, _ in spotify }
        state.withLockedValue { current in
            var next: [String: (config: SpotifySession, session: TokenSession)] = [:]
            for (name, sessionConfig) in all {
                if !accountsChanged, let kept = current.sessions[name], kept.config == sessionConfig {
                    next[name] = kept
                } else {
                    next[name] = (sessionConfig, TokenSession(config: sessionConfig, endpoint: makeEndpoint(config, sessionConfig),
                                                              events: events, logger: logger, shared: shared))
                }
            }
            current = Current(config: config, sessions: next, statics: statics)
        }
    }

    func prefetchAll() {
        state.withLockedValue { $0.sessions.values.map(\.session) }.forEach { $0.prefetch() }
    }

    /// One line per credential that cannot serve, for `/readyz`.
    var readinessDetails: [String] {
        state.withLockedValue { current in
            let sessions = current.sessions.keys.sorted().compactMap { name -> String? in
                let entry = current.sessions[name]!
                let status = entry.session.status
                let what = entry.config.tokenURL == nil ? "spotify session" : "credential"
                return status.isHealthy ? nil : "\(what) \(name) \(status)"
            }
            let statics = current.statics.keys.sorted().compactMap { name -> String? in
                if case .failure(let error) = current.statics[name]! { return "credential \(name) \(error)" }
                return nil
            }
            return sessions + statics
        }
    }

    /// Each credential's name, flow (or `static`) and state for the status page: no secret.
    var summaries: [SessionSummary] {
        state.withLockedValue { current in
            let sessions = current.sessions.map { name, entry in
                SessionSummary(name: name, flow: entry.config.flow.rawValue, status: entry.session.status)
            }
            let statics = current.statics.map { name, value -> SessionSummary in
                switch value {
                case .success: return SessionSummary(name: name, flow: "static", status: .ok)
                case .failure(let error): return SessionSummary(name: name, flow: "static", status: .misconfigured(reason: "\(error)"))
                }
            }
            return (sessions + statics).sorted { $0.name < $1.name }
        }
    }

    func token(session name: String) async throws -> BearerToken {
        let (session, fixed, timeout) = state.withLockedValue { ($0.sessions[name]?.session, $0.statics[name], $0.config.tokenTimeout) }
        if let fixed {
            return Self.bearer(try fixed.get())
        }
        guard let session else {
            throw TokenError.misconfigured(reason: "no credential named \(name)")
        }
        return Self.bearer(try await session.token(timeout: timeout))
    }

    func tokenNow(session name: String) -> BearerToken? {
        let (session, fixed) = state.withLockedValue { ($0.sessions[name]?.session, $0.statics[name]) }
        if let fixed {
            guard case .success(let value) = fixed else { return nil }  // `token(session:)` says why
            return Self.bearer(value)
        }
        return session?.tokenNow().map(Self.bearer)
    }

    /// A static value's token: generation -1, as it cannot be refreshed, so a 401 is not replayed.
    private static func bearer(_ value: Secret) -> BearerToken {
        BearerToken(value: value.reveal(), generation: -1)
    }

    private static func bearer(_ token: AccessToken) -> BearerToken {
        BearerToken(value: token.reveal(), generation: token.generation)
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
            refreshTokenIssued: { session, issued in metrics.refreshTokenIssued(session: session, at: issued) },
            refreshTokenStoreFailed: { session in metrics.refreshTokenStoreFailed(session: session) })
    }
}
