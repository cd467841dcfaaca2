/// The `credentials:` section (docs/contract.md §3 `credentials`): named
/// secrets a host policy's `auth` injects. `oauth2` entries are token
/// sessions like `spotify.sessions` entries (one `SpotifySession` type, one
/// machinery: single flight, refresh ahead, backoff, rotation, 401 replay,
/// the shared store); `static` entries are a fixed value.
public struct CredentialsConfig: Sendable, Hashable {
    public var statics: [String: StaticCredential]
    public var oauth2: [String: SpotifySession]

    public init(statics: [String: StaticCredential] = [:], oauth2: [String: SpotifySession] = [:]) {
        self.statics = statics
        self.oauth2 = oauth2
    }

    public static let none = CredentialsConfig()
}

/// `kind: static`: an API key or personal access token, from `value_file`
/// (read at load and at each reload) or `value: ${VAR}`.
public struct StaticCredential: Sendable, Hashable {
    public var name: String
    public var value: SecretSource
    public var location: SourceLocation

    public init(name: String, value: SecretSource, location: SourceLocation = .embeddedDefaults) {
        self.name = name
        self.value = value
        self.location = location
    }
}

/// What a credential name stands for, wherever it was defined.
public enum CredentialKind: String, Sendable, Hashable {
    case staticValue = "static"
    case oauth2
    case spotify
}

extension PinproxyConfig {
    /// Every credential a policy may name: `credentials:` entries and the
    /// `spotify.sessions` entries (the Spotify preset), by name.
    public var credentialKinds: [String: CredentialKind] {
        var kinds: [String: CredentialKind] = [:]
        for name in spotify.sessions.keys { kinds[name] = .spotify }
        for name in credentials.oauth2.keys { kinds[name] = .oauth2 }
        for name in credentials.statics.keys { kinds[name] = .staticValue }
        return kinds
    }

    /// The OAuth2 token sessions of both sections, by name.
    public var tokenSessions: [String: SpotifySession] {
        spotify.sessions.merging(credentials.oauth2) { spotify, _ in spotify }
    }
}
