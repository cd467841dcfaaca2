/// `spotify.store`: the PostgreSQL database the replicas of one pinproxy
/// share their Spotify sessions through (docs/contract.md §12). Absent: each
/// replica keeps its own sessions (§7).
public struct SpotifyStoreConfig: Sendable, Hashable {
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        case disable
        /// TLS when the server offers it, plain otherwise.
        case prefer
        /// TLS with the server's certificate verified against the system trust store.
        case require
    }

    /// The URL as written (after `${VAR}` expansion); never carries a password.
    public var url: String
    public var host: String
    public var port: Int
    public var user: String
    public var database: String
    /// `password` (usually `${VAR}`) or `password_file`; nil for trust or peer authentication.
    public var password: SecretSource?
    public var tls: TLSMode
    /// The AES-256 key that seals every stored token: base64 of 32 bytes.
    public var keyFile: String
    /// The key's bytes as read when the configuration was loaded (so `check` can refuse a bad key).
    public var key: Secret
    public var location: SourceLocation

    public init(url: String, host: String, port: Int, user: String, database: String, password: SecretSource?,
                tls: TLSMode, keyFile: String, key: Secret, location: SourceLocation = .embeddedDefaults) {
        self.url = url
        self.host = host
        self.port = port
        self.user = user
        self.database = database
        self.password = password
        self.tls = tls
        self.keyFile = keyFile
        self.key = key
        self.location = location
    }
}
