/// A plain description of one TLS context: everything a policy or a command
/// says about a leg, and nothing about a particular connection. Build a
/// `TLSContext` from it once and share that across connections.
public struct TLSConfiguration: Sendable {
    public enum Role: Sendable, Hashable {
        case client
        case server
    }

    /// Which certificates a client trusts.
    public enum TrustRoots: Sendable, Hashable {
        /// The system's store (Debian: /etc/ssl/certs through OpenSSL's default paths).
        case system
        /// A PEM file of trusted certificates, in place of the system's.
        case file(String)
        /// Certificates given directly (tests, the interception CA).
        case certificates([Certificate])
    }

    /// How a client treats the server's chain.
    public enum Verification: Sendable, Hashable {
        /// Chain and hostname must verify; failure ends the handshake (`verify_failed`).
        case full
        /// The handshake completes whatever the chain; the verify result is only
        /// reported (`pinproxy pin --connect`, which must show an untrusted chain).
        case reportOnly
    }

    public var role: Role
    public var minimumVersion: TLSVersion
    public var maximumVersion: TLSVersion?
    /// OpenSSL cipher string for TLS ≤ 1.2 (`SSL_CTX_set_cipher_list`); nil keeps OpenSSL's default.
    public var cipherList: String?
    /// TLS 1.3 ciphersuites (`SSL_CTX_set_ciphersuites`); nil keeps OpenSSL's default.
    public var cipherSuites: String?
    /// Key-exchange groups (`SSL_CTX_set1_groups_list`); nil keeps OpenSSL's default.
    public var groups: String?
    public var trustRoots: TrustRoots
    public var verification: Verification
    /// The certificate this side presents: a server's static certificate, or a
    /// client certificate for mTLS. Leaf first, then intermediates.
    public var certificateChain: [Certificate]
    public var privateKey: PrivateKey?
    /// ALPN protocols offered (client) or accepted (server), most preferred first.
    public var applicationProtocols: [String]
    /// Client: keep sessions per peer and resume them. Server: issue tickets.
    public var sessionResumption: Bool

    public init(
        role: Role,
        minimumVersion: TLSVersion = .v1_2,
        maximumVersion: TLSVersion? = nil,
        cipherList: String? = nil,
        cipherSuites: String? = nil,
        groups: String? = nil,
        trustRoots: TrustRoots = .system,
        verification: Verification = .full,
        certificateChain: [Certificate] = [],
        privateKey: PrivateKey? = nil,
        applicationProtocols: [String] = ["http/1.1"],
        sessionResumption: Bool = true
    ) {
        self.role = role
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
        self.cipherList = cipherList
        self.cipherSuites = cipherSuites
        self.groups = groups
        self.trustRoots = trustRoots
        self.verification = verification
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.applicationProtocols = applicationProtocols
        self.sessionResumption = sessionResumption
    }

    public static func client(
        minimumVersion: TLSVersion = .v1_2,
        trustRoots: TrustRoots = .system
    ) -> TLSConfiguration {
        TLSConfiguration(role: .client, minimumVersion: minimumVersion, trustRoots: trustRoots)
    }

    /// A server with a fixed certificate. Per-connection certificates (the
    /// interception leg) come from a `TLSCertificateSelector` on the handler instead.
    public static func server(
        certificateChain: [Certificate] = [],
        privateKey: PrivateKey? = nil,
        minimumVersion: TLSVersion = .v1_2
    ) -> TLSConfiguration {
        TLSConfiguration(
            role: .server, minimumVersion: minimumVersion, trustRoots: .certificates([]),
            certificateChain: certificateChain, privateKey: privateKey)
    }
}
