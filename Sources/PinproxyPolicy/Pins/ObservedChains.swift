import Foundation

/// One certificate of a chain an upstream presented: what a pin would be made of.
public struct ObservedCertificateInfo: Sendable, Hashable {
    /// The SPKI SHA-256, Base64 (what `spki_sha256:` takes).
    public var spkiSHA256: String
    public var subject: String
    public var issuer: String
    public var notBefore: Date
    public var notAfter: Date

    public init(spkiSHA256: String, subject: String, issuer: String, notBefore: Date, notAfter: Date) {
        self.spkiSHA256 = spkiSHA256
        self.subject = subject
        self.issuer = issuer
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    /// Self-issued: the end of a verified chain (a root from the trust store).
    public var isSelfIssued: Bool { subject == issuer }
}

/// One distinct chain (by its SPKI pins, leaf to root) seen for a host.
public struct ObservedChain: Sendable, Hashable {
    public var certificates: [ObservedCertificateInfo]
    public var firstSeen: Date
    public var lastSeen: Date
    public var count: Int
    /// How the pins judged it the last time it was seen, as
    /// `pin_validations_total` labels it (`match`, `mismatch_enforced`…); nil
    /// when not known. A chain the proxy refused must never be suggested as if
    /// it were the host's own (docs/contract.md §13).
    public var verdict: String?

    public init(certificates: [ObservedCertificateInfo], firstSeen: Date, lastSeen: Date, count: Int, verdict: String? = nil) {
        self.certificates = certificates
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.count = count
        self.verdict = verdict
    }
}

/// Every chain seen for one upstream host name, most recently seen first.
public struct ObservedHost: Sendable, Hashable {
    /// The name dialled (SNI), not the pattern: a wildcard policy has many.
    public var host: String
    /// The pattern of the policy that dialled it.
    public var policy: String
    public var chains: [ObservedChain]
    public var lastSeen: Date

    public init(host: String, policy: String, chains: [ObservedChain], lastSeen: Date) {
        self.host = host
        self.policy = policy
        self.chains = chains
        self.lastSeen = lastSeen
    }
}

/// Pins learned from traffic and probes (docs/contract.md §13): bounded, in
/// memory, forgotten at restart. A value type so the bookkeeping is tested
/// without a server; `PinproxyServer` keeps one behind a lock. When full, the
/// host (or chain) seen least recently makes room: a host that keeps talking
/// is never the one forgotten.
public struct ObservedChains: Sendable {
    public var maxHosts: Int
    public var maxChainsPerHost: Int
    private var hosts: [String: ObservedHost] = [:]

    public init(maxHosts: Int = 256, maxChainsPerHost: Int = 8) {
        precondition(maxHosts > 0 && maxChainsPerHost > 0, "ObservedChains needs room for one host and one chain")
        self.maxHosts = maxHosts
        self.maxChainsPerHost = maxChainsPerHost
    }

    public mutating func record(host: String, policy: String, chain: [ObservedCertificateInfo], verdict: String? = nil, at now: Date) {
        guard !chain.isEmpty else { return }
        let key = host.lowercased()
        var entry = hosts[key] ?? ObservedHost(host: key, policy: policy, chains: [], lastSeen: now)
        entry.policy = policy
        entry.lastSeen = now
        let pins = chain.map(\.spkiSHA256)
        if let index = entry.chains.firstIndex(where: { $0.certificates.map(\.spkiSHA256) == pins }) {
            var seen = entry.chains.remove(at: index)
            seen.lastSeen = now
            seen.count += 1
            seen.certificates = chain  // the newest notAfter of a renewed certificate with the same key
            seen.verdict = verdict ?? seen.verdict  // the latest judgement: pins change on reload
            entry.chains.insert(seen, at: 0)
        } else {
            entry.chains.insert(ObservedChain(certificates: chain, firstSeen: now, lastSeen: now, count: 1, verdict: verdict), at: 0)
            if entry.chains.count > maxChainsPerHost { entry.chains.removeLast(entry.chains.count - maxChainsPerHost) }
        }
        hosts[key] = entry
        if hosts.count > maxHosts, let stalest = hosts.values.min(by: { $0.lastSeen < $1.lastSeen }) {
            hosts[stalest.host] = nil
        }
    }

    /// Every host, sorted by name.
    public var all: [ObservedHost] { hosts.values.sorted { $0.host < $1.host } }

    /// The hosts a policy dialled, sorted by name.
    public func hosts(forPolicy pattern: String) -> [ObservedHost] { all.filter { $0.policy == pattern } }
}
