import Logging

/// The main file (docs/contract.md §3), with every default applied. Values are plain
/// typed fields; where each was written is in `sourceMap`, by dotted key
/// path (`sourceMap["admin.listen"]`), for errors found later (a bind that
/// fails, a CA file that cannot be read).
public struct PinproxyConfig: Sendable {
    /// The file this came from; nil when running on the embedded defaults.
    public var file: String?
    public var listen: HostPort
    public var admin: Admin
    public var ca: CA
    /// A directory of `*.yaml`/`*.yml` policy files, or one file; absolute.
    public var policiesPath: String
    public var defaultAction: DefaultAction
    /// Who may use the proxy.
    public var clientsAllow: [CIDR]
    /// `clients.identities`: who may authenticate, by name (docs/contract.md §15).
    public var identities: [String: ClientIdentity] = [:]
    /// `clients.require_identity`: every request must authenticate.
    public var requireIdentity = false
    public var network: Network
    public var limits: Limits
    /// Event-loop threads serving connections; 0 means one per CPU core
    /// (Envoy's `--concurrency`, Squid's `workers`).
    public var concurrency: Int
    public var spotify: SpotifyConfig
    /// `credentials:`: static secrets and OAuth2 clients policies inject (docs/contract.md §3).
    public var credentials: CredentialsConfig = .none
    public var log: Log
    /// Offer HTTP/2 to apps on intercepted sessions (ALPN `h2, http/1.1`);
    /// false offers only `http/1.1` (docs/contract.md §11).
    public var http2: Bool = true
    /// `transparent`: a second listener for connections the kernel redirected
    /// (docs/transparent-interception.md); nil when the block is absent.
    public var transparent: Transparent? = nil
    public var sourceMap: SourceMap

    public struct Admin: Sendable, Hashable {
        public var listen: HostPort
        /// `admin.hosts`: more names the admin API answers to, beyond the listen
        /// address and loopback names (a DNS-rebinding guard; docs/contract.md §5).
        /// Lowercased, without a trailing dot.
        public var hosts: [String] = []
    }

    /// The interception CA; created on first run when both files are missing.
    public struct CA: Sendable, Hashable {
        public var certificatePath: String
        public var keyPath: String
        /// `ca.chain`: the certificates above `cert` when it is an intermediate
        /// under an organisation's root, nearest first; served with every leaf.
        public var chainPath: String? = nil
    }

    /// `transparent.listen`: where nftables `redirect` (or iptables `REDIRECT`) sends apps that ignore HTTPS_PROXY.
    public struct Transparent: Sendable, Hashable {
        public var listen: HostPort
        public init(listen: HostPort) { self.listen = listen }
    }

    public struct Network: Sendable, Hashable {
        /// Refuse upstream addresses in loopback, RFC 1918, link-local, CGNAT, ULA, multicast…
        public var denyPrivate: Bool
        /// Exempt from `denyPrivate`.
        public var allow: [CIDR]
    }

    public struct Limits: Sendable, Hashable {
        public var maxClientConnections: Int
        /// Slow-loris bound for request heads.
        public var headerTimeout: Duration
        public var idleTimeout: Duration
        public var maxHeaderBytes: Int
        /// SIGTERM: stop accepting, drain for this long, then close.
        public var shutdownGrace: Duration
    }

    public struct Log: Sendable, Hashable {
        public var level: Logger.Level
        public var format: LogFormat
    }

    public enum LogFormat: String, Sendable, Hashable, CaseIterable {
        case json
        case text
    }

    /// What happens to hosts no policy matches. Intercepting an unknown host
    /// would pin nothing, so it is not offered.
    public enum DefaultAction: String, Sendable, Hashable, CaseIterable {
        case deny
        case tunnel
    }
}

extension PinproxyConfig {
    /// The embedded defaults (docs/contract.md §3), resolved against `workingDirectory`:
    /// what `run` uses with no config file at all, and what every key a file
    /// leaves out falls back to.
    public static func defaults(workingDirectory: String) -> PinproxyConfig {
        PinproxyConfig(
            file: nil,
            listen: HostPort(host: "127.0.0.1", port: 8080),
            admin: Admin(listen: HostPort(host: "127.0.0.1", port: 9090)),
            ca: CA(
                certificatePath: PathResolution.resolve("state/ca.pem", against: workingDirectory),
                keyPath: PathResolution.resolve("state/ca-key.pem", against: workingDirectory)),
            policiesPath: PathResolution.resolve("etc/policies", against: workingDirectory),
            defaultAction: .deny,
            clientsAllow: [try! CIDR(parsing: "127.0.0.0/8"), try! CIDR(parsing: "::1/128")],
            network: Network(denyPrivate: true, allow: []),
            limits: Limits(
                maxClientConnections: 10000, headerTimeout: .seconds(10), idleTimeout: .seconds(60),
                maxHeaderBytes: 65536, shutdownGrace: .seconds(10)),
            concurrency: 0,
            spotify: SpotifyConfig(
                accounts: "https://accounts.spotify.com", tokenTimeout: .seconds(10), sessions: [:], swap: nil),
            log: Log(level: .info, format: .json),
            sourceMap: SourceMap(origin: .embeddedDefaults))
    }
}
