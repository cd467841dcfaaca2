import COpenSSL
import Foundation
import NIOConcurrencyHelpers

/// pinproxy's interception CA (docs/contract.md §3 "Interception certificates"): ECDSA
/// P-256, ten years, key file 0600. It mints the leaves the legacy app sees:
/// one process-wide P-256 leaf key (never the CA key), SAN = the host asked
/// for, validity of days, SHA-256, kept in a bounded LRU cache per name.
/// The CA may be an intermediate under an organisation's root: leaves are
/// then served with the intermediates, so clients need trust only the root.
public final class CertificateAuthority: Sendable {
    public let certificate: Certificate
    /// The certificates above `certificate`, nearest first (`ca.chain`), as configured.
    public let chain: [Certificate]
    /// What follows a leaf on the wire: the CA and the chain, without a
    /// self-signed root (the client has it, or must not be handed it).
    private let servedChain: [Certificate]
    let key: PrivateKey
    /// The one key every minted leaf carries; made once per process.
    private let leafKey: PrivateKey
    public let leafValidity: TimeInterval
    private let cache: NIOLockedValueBox<LRUCache<String, TLSCertifiedKey>>
    private let minted = NIOLockedValueBox(0)

    public static let defaultLeafValidity: TimeInterval = 7 * 86_400
    public static let defaultCacheCapacity = 1024

    public init(
        certificate: Certificate,
        key: PrivateKey,
        chain: [Certificate] = [],
        leafValidity: TimeInterval = CertificateAuthority.defaultLeafValidity,
        cacheCapacity: Int = CertificateAuthority.defaultCacheCapacity
    ) throws {
        let problems = CertificateAuthority.problems(certificate: certificate, key: key, chain: chain)
        guard problems.isEmpty else {
            throw TLSError.configuration(problems.map(\.message).joined(separator: "; "))
        }
        self.certificate = certificate
        self.chain = chain
        self.servedChain = ([certificate] + chain).filter { !$0.isSelfSigned }
        self.key = key
        self.leafKey = try PrivateKey.generateP256()
        self.leafValidity = leafValidity
        self.cache = NIOLockedValueBox(LRUCache(capacity: cacheCapacity))
    }

    // MARK: Creating, loading, writing

    /// A new CA: ECDSA P-256, self-signed, valid ten years from `now`.
    public static func create(commonName: String? = nil, now: Date = Date()) throws -> CertificateAuthority {
        let key = try PrivateKey.generateP256()
        let builder = CertificateBuilder(
            subjectCommonName: commonName ?? defaultCommonName(for: key),
            subjectOrganization: "pinproxy",
            notBefore: now.addingTimeInterval(-3600),
            notAfter: now.addingTimeInterval(10 * 365.25 * 86_400),
            extensions: [
                ("basicConstraints", "critical,CA:TRUE,pathlen:0"),
                ("keyUsage", "critical,keyCertSign,cRLSign"),
                ("subjectKeyIdentifier", "hash"),
            ])
        let certificate = try builder.build(publicKey: key, issuer: nil, issuerKey: key)
        return try CertificateAuthority(certificate: certificate, key: key)
    }

    /// `pinproxy interception CA <8 hex digits of the key's SPKI hash>`: a
    /// distinct name per installation, so two deployments' CAs are told apart.
    public static func defaultCommonName(for key: PrivateKey) -> String {
        "pinproxy interception CA " + SHA256Digest.hash(key.publicKeySPKI).prefix(4).map { String(format: "%02x", $0) }.joined()
    }

    // MARK: Minting

    /// The leaf for `name` (a DNS name or an IP literal), from the cache while
    /// it has more than a day left, else freshly minted. Thread-safe.
    public func leaf(for name: String, now: Date = Date()) throws -> TLSCertifiedKey {
        try leafReportingMint(for: name, now: now).leaf
    }

    /// `leaf(for:)`, and whether this call minted it (for the
    /// `minted_certificates_total` metric; other threads may mint meanwhile).
    public func leafReportingMint(for name: String, now: Date = Date()) throws -> (leaf: TLSCertifiedKey, minted: Bool) {
        let normalized = Self.normalize(name)
        if let cached = cache.withLockedValue({ $0.value(for: normalized) }),
           cached.chain[0].notAfter.timeIntervalSince(now) > 86_400 {
            return (cached, false)
        }
        let certified = TLSCertifiedKey(chain: [try mint(normalized, now: now)] + servedChain, privateKey: leafKey)
        _ = cache.withLockedValue { $0.set(certified, for: normalized) }
        minted.withLockedValue { $0 += 1 }
        return (certified, true)
    }

    /// How many leaves were minted (not served from cache) since start.
    public var mintedCount: Int { minted.withLockedValue { $0 } }
    public var cachedCount: Int { cache.withLockedValue { $0.count } }

    private func mint(_ name: String, now: Date) throws -> Certificate {
        let isIP = IPAddressText.isIPAddress(name)
        // A leaf never outlives a certificate it is served with.
        let notAfter = ([certificate] + chain).map(\.notAfter).reduce(now.addingTimeInterval(leafValidity), min)
        let builder = CertificateBuilder(
            subjectCommonName: name,
            subjectOrganization: nil,
            notBefore: now.addingTimeInterval(-3600),  // tolerate client clocks a little behind
            notAfter: notAfter,
            extensions: [
                ("basicConstraints", "critical,CA:FALSE"),
                ("keyUsage", "critical,digitalSignature"),
                ("extendedKeyUsage", "serverAuth"),
                ("subjectAltName", isIP ? "IP:\(name)" : "DNS:\(name)"),
                ("subjectKeyIdentifier", "hash"),
                // A CA issued elsewhere may lack a key identifier: name it by issuer and serial then.
                ("authorityKeyIdentifier", certificate.hasSubjectKeyIdentifier ? "keyid:always" : "issuer:always"),
            ])
        return try builder.build(publicKey: leafKey, issuer: certificate, issuerKey: key)
    }

    private static func normalize(_ name: String) -> String {
        var host = name.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host
    }
}
