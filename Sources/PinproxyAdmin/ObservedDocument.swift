import Foundation
import PinproxyPolicy

// `observed` in `GET /policies` (docs/contract.md §13): the chains each upstream
// host presented, leaf to root, as `pinproxy pins suggest` reads them back.
// Public keys' hashes, subjects and dates: nothing secret.

struct ObservedHostDocument: Encodable {
    var host: String
    var policy: String
    var lastSeen: String
    var chains: [ObservedChainDocument]

    init(_ host: ObservedHost) {
        self.host = host.host
        policy = host.policy
        lastSeen = DateText.format(host.lastSeen)
        chains = host.chains.map(ObservedChainDocument.init)
    }

    enum CodingKeys: String, CodingKey {
        case host, policy, chains
        case lastSeen = "last_seen"
    }
}

struct ObservedChainDocument: Encodable {
    var firstSeen: String
    var lastSeen: String
    var count: Int
    /// The pin verdict the last time it was seen (`match`, `mismatch_enforced`…).
    var verdict: String?
    var certificates: [ObservedCertificateDocument]

    init(_ chain: ObservedChain) {
        firstSeen = DateText.format(chain.firstSeen)
        lastSeen = DateText.format(chain.lastSeen)
        count = chain.count
        verdict = chain.verdict
        certificates = chain.certificates.map(ObservedCertificateDocument.init)
    }

    enum CodingKeys: String, CodingKey {
        case count, certificates, verdict
        case firstSeen = "first_seen"
        case lastSeen = "last_seen"
    }
}

struct ObservedCertificateDocument: Encodable {
    var pin: String
    var subject: String
    var issuer: String
    var notBefore: String
    var notAfter: String

    init(_ certificate: ObservedCertificateInfo) {
        pin = certificate.spkiSHA256
        subject = certificate.subject
        issuer = certificate.issuer
        notBefore = DateText.format(certificate.notBefore)
        notAfter = DateText.format(certificate.notAfter)
    }

    enum CodingKeys: String, CodingKey {
        case pin, subject, issuer
        case notBefore = "not_before"
        case notAfter = "not_after"
    }
}
