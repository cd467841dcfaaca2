/// The `spotify:` section: token sessions that host policies name in
/// `auth.spotify`, and the optional token swap backend (docs/contract.md §3, §7).
public struct SpotifyConfig: Sendable {
    /// Token endpoint base (`{accounts}/api/token`); its own connection obeys
    /// the host policy of its host.
    public var accounts: String
    /// Longest a request waits for a token before 503 `token_unavailable`.
    public var tokenTimeout: Duration
    public var sessions: [String: SpotifySession]
    /// Absent: the swap backend is off.
    public var swap: SpotifySwap?
    /// Absent: each replica keeps its own sessions (docs/contract.md §12).
    public var store: SpotifyStoreConfig?

    public init(accounts: String, tokenTimeout: Duration, sessions: [String: SpotifySession], swap: SpotifySwap?,
                store: SpotifyStoreConfig? = nil) {
        self.accounts = accounts
        self.tokenTimeout = tokenTimeout
        self.sessions = sessions
        self.swap = swap
        self.store = store
    }
}

/// A secret given inline (from `${VAR}`) or as a file holding the raw value.
/// Files are read by whoever uses the secret, when it is used, so a rotated
/// secret file is picked up without a reload.
public enum SecretSource: Sendable, Hashable, CustomStringConvertible {
    case inline(Secret)
    case file(String)

    public var description: String {
        switch self {
        case .inline: return "inline <redacted>"
        case .file(let path): return "file \(path)"
        }
    }
}

/// An OAuth2 client's token session: a `spotify.sessions` entry (the
/// Spotify preset: Spotify's token URL, Basic client auth) or a
/// `credentials:` entry of `kind: oauth2` (docs/contract.md §3).
public typealias OAuth2Credential = SpotifySession

public struct SpotifySession: Sendable, Hashable {
    public enum Flow: String, Sendable, Hashable, CaseIterable {
        case clientCredentials = "client_credentials"
        case refreshToken = "refresh_token"
    }

    /// How the client authenticates to the token endpoint (RFC 6749 §2.3.1).
    public enum ClientAuth: String, Sendable, Hashable, CaseIterable {
        /// HTTP Basic with the form-encoded id and secret.
        case basic
        /// `client_id` and `client_secret` in the form body.
        case post
    }

    /// One extra form parameter sent with every token request.
    public struct FormParameter: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public var name: String
    public var flow: Flow
    public var clientID: String
    /// Required for `client_credentials`; optional for `refresh_token` (PKCE).
    public var clientSecret: SecretSource?
    /// `refresh_token` flow: the stored token, rewritten 0600 on rotation.
    public var refreshTokenFile: String?
    /// Refresh this long before expiry (capped at half the lifetime, docs/contract.md §10).
    public var refreshBefore: Duration
    /// Where `pinproxy credentials login` (or `spotify login`) listens for the authorization code.
    public var redirectURI: String?
    /// The session's name under `spotify.sessions`.
    public var location: SourceLocation
    /// `credentials.*.token_url`; nil: `spotify.accounts` + `/api/token` (the preset).
    public var tokenURL: String? = nil
    public var clientAuth: ClientAuth = .basic
    /// `scope`, `audience` and `resource` (RFC 8707), sent when given.
    public var scope: String? = nil
    public var audience: String? = nil
    public var resource: String? = nil
    /// `extra`: more form parameters, in name order.
    public var extraParameters: [FormParameter] = []
    /// `credentials.*.authorize_url`: the provider's authorization endpoint,
    /// which makes `pinproxy credentials login` possible; nil for the preset
    /// (`spotify.accounts` + `/authorize`).
    public var authorizeURL: String? = nil
    /// How messages name it: `Spotify session NAME` for a `spotify.sessions`
    /// entry, `credential NAME` for a `credentials:` entry.
    public var kindAndName: String {
        tokenURL == nil ? "Spotify session \(name)" : "credential \(name)"
    }

    /// What an operator does after `invalid_grant`, for messages: the
    /// Spotify preset and a provider with an authorization endpoint have a
    /// login command; another provider's token is obtained however it says.
    public var reauthorizeHint: String {
        if tokenURL == nil { return "run `pinproxy spotify login \(name)`" }
        if authorizeURL != nil { return "run `pinproxy credentials login \(name)`" }
        return "store a new refresh token for `\(name)` in its refresh_token_file"
    }

    /// For code that builds a session without a file (tests, `spotify login`).
    public init(name: String, flow: Flow, clientID: String, clientSecret: SecretSource?, refreshTokenFile: String?,
                refreshBefore: Duration = .seconds(300), redirectURI: String? = nil, location: SourceLocation = .embeddedDefaults) {
        self.name = name
        self.flow = flow
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.refreshTokenFile = refreshTokenFile
        self.refreshBefore = refreshBefore
        self.redirectURI = redirectURI
        self.location = location
    }
}

public struct SpotifySwap: Sendable, Hashable {
    public var listen: HostPort
    /// The session whose client id and secret the swap calls use.
    public var session: String
    public var redirectURI: String
    /// AES-256 key, base64 of 32 bytes.
    public var key: SecretSource
    /// The reference swap service's secret; its tokens are accepted read-only.
    public var legacySecretFile: String?
    public var location: SourceLocation
}
