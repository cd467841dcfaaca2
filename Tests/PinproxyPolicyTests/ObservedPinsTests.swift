import Foundation
import PinproxyPolicy
import Testing

/// Pins learned from traffic (docs/contract.md §13): bounded bookkeeping, and the pair `pins suggest` picks.
struct ObservedPinsTests {
    static func cert(_ seed: UInt8, _ subject: String, issuer: String, days: Double) -> ObservedCertificateInfo {
        ObservedCertificateInfo(spkiSHA256: Fixture.pin(seed), subject: subject, issuer: issuer,
                                notBefore: Fixture.now - Fixture.days(30), notAfter: Fixture.now + Fixture.days(days))
    }
    static let leaf = cert(1, "CN=api.example.com", issuer: "CN=Inter", days: 60)
    static let inter = cert(2, "CN=Inter", issuer: "CN=Root", days: 700)
    static let root = cert(3, "CN=Root", issuer: "CN=Root", days: 3000)

    @Test func aChainSeenAgainIsCountedOnceWithFirstAndLastSeen() {
        var chains = ObservedChains()
        chains.record(host: "API.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], at: Fixture.now)
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], at: Fixture.now + 60)
        let host = try! #require(chains.all.first)
        #expect(chains.all.count == 1)
        #expect(host.chains.count == 1)
        #expect(host.chains[0].count == 2)
        #expect(host.chains[0].firstSeen == Fixture.now)
        #expect(host.chains[0].lastSeen == Fixture.now + 60)
    }

    @Test func theStoreIsBoundedAndForgetsTheStalest() {
        var chains = ObservedChains(maxHosts: 2, maxChainsPerHost: 2)
        for (index, host) in ["a.test", "b.test", "c.test"].enumerated() {
            chains.record(host: host, policy: host, chain: [Self.leaf], at: Fixture.now + Double(index))
        }
        #expect(chains.all.map(\.host) == ["b.test", "c.test"])
        for seed: UInt8 in 10...13 {
            chains.record(host: "b.test", policy: "b.test", chain: [Self.cert(seed, "CN=x", issuer: "CN=y", days: 1)], at: Fixture.now + 10)
        }
        #expect(chains.hosts(forPolicy: "b.test").first?.chains.map(\.certificates[0].spkiSHA256) == [Fixture.pin(13), Fixture.pin(12)])
    }

    @Test func theSuggestionIsTheIntermediateAndTheRootNotTheLeaf() throws {
        var chains = ObservedChains()
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], at: Fixture.now)
        let suggestion = try #require(PinSuggestion.suggest(for: chains.all[0], now: Fixture.now))
        #expect(suggestion.choices.map(\.role) == ["intermediate", "root"])
        #expect(suggestion.choices.map(\.certificate.spkiSHA256) == [Fixture.pin(2), Fixture.pin(3)])
        #expect(suggestion.yaml.contains("spki_sha256:\n  - pin: \"\(Fixture.pin(2))\"\n    not_after: "))
        #expect(suggestion.yaml.contains("# an intermediate and the root above it"))
    }

    @Test func withoutAnIntermediateTheRootAndTheLeafAreSuggestedWithAWarning() throws {
        let host = ObservedHost(host: "x.test", policy: "x.test", chains: [
            ObservedChain(certificates: [Self.leaf, Self.root], firstSeen: Fixture.now, lastSeen: Fixture.now, count: 1),
        ], lastSeen: Fixture.now)
        let suggestion = try #require(PinSuggestion.suggest(for: host, now: Fixture.now))
        #expect(suggestion.choices.map(\.role) == ["root", "leaf"])
        #expect(suggestion.reasons.joined().contains("replace the leaf pin before it expires"))
    }

    static let otherLeaf = cert(7, "CN=api.example.com", issuer: "CN=Corporate Inspection CA", days: 30)
    static let otherRoot = cert(8, "CN=Corporate Inspection CA", issuer: "CN=Corporate Inspection CA", days: 3000)

    /// After an enforced mismatch the chain seen last is the interceptor's: the
    /// suggestion stays with the chain that matched (issue 28 item 10).
    @Test func aChainThatMatchedIsPreferredToARefusedOneSeenLater() throws {
        var chains = ObservedChains()
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], verdict: "match", at: Fixture.now)
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.otherLeaf, Self.otherRoot], verdict: "mismatch_enforced",
                      at: Fixture.now + 60)
        let host = try #require(chains.all.first)
        #expect(host.chains.map(\.verdict) == ["mismatch_enforced", "match"], "most recent first, each with its verdict")
        let suggestion = try #require(PinSuggestion.suggest(for: host, now: Fixture.now))
        #expect(suggestion.choices.map(\.certificate.spkiSHA256) == [Fixture.pin(2), Fixture.pin(3)])
        #expect(suggestion.warnings.isEmpty)
        #expect(suggestion.yaml.contains("2 different chains were seen; this uses the one that matched the policy's pins"))
        #expect(suggestion.yaml.contains("1 other matched no pin"))
    }

    /// With nothing better, a refused chain is still shown, under a loud warning.
    @Test func aRefusedChainAloneIsMarkedLoudly() throws {
        var chains = ObservedChains()
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.otherLeaf, Self.otherRoot], verdict: "mismatch_enforced",
                      at: Fixture.now)
        let refusedOnly = try #require(chains.all.first)
        let suggestion = try #require(PinSuggestion.suggest(for: refusedOnly, now: Fixture.now))
        let yaml = suggestion.yaml(indent: 6)
        #expect(yaml.hasPrefix("      # WARNING: pinproxy REFUSED this chain (pin_mismatch)"), "\(yaml)")
        #expect(yaml.split(separator: "\n").allSatisfy { $0.hasPrefix("      ") }, "every line indented to paste under pins:")

        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], verdict: "mismatch_reported",
                      at: Fixture.now + 1)
        let both = try #require(chains.all.first)
        let reported = try #require(PinSuggestion.suggest(for: both, now: Fixture.now))
        #expect(reported.choices.map(\.certificate.spkiSHA256) == [Fixture.pin(2), Fixture.pin(3)], "reported beats refused")
        #expect(reported.yaml.hasPrefix("# WARNING: this chain matched NONE of the policy's pins (reported, not refused)"))
    }

    /// The learning phase (no pin to compare) is not suspicious: no warning, a plain note.
    @Test func aChainFromTheLearningPhaseIsSuggestedWithoutAWarning() throws {
        var chains = ObservedChains()
        chains.record(host: "api.example.com", policy: "api.example.com", chain: [Self.leaf, Self.inter, Self.root], verdict: "unpinned", at: Fixture.now)
        let learned = try #require(chains.all.first)
        let suggestion = try #require(PinSuggestion.suggest(for: learned, now: Fixture.now))
        #expect(suggestion.warnings.isEmpty)
        #expect(suggestion.yaml.contains("# the chain verified against the trust store; no active pin was there to compare it with"))
    }
}
