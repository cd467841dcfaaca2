import Foundation

/// `pinproxy pins suggest` (docs/contract.md §13): from the chains a host
/// presented, a pair of pins to paste, and why those two. Pure: the caller
/// supplies what was observed and the time.
public struct PinSuggestion: Sendable, Hashable {
    public struct Choice: Sendable, Hashable {
        public var certificate: ObservedCertificateInfo
        /// `intermediate`, `root` or `leaf`: what the pin is of.
        public var role: String
    }

    public var host: String
    public var policy: String
    public var choices: [Choice]
    /// Why these pins, in a sentence or two (printed as YAML comments).
    public var reasons: [String]
    /// The chain the choice is made from (the one seen last).
    public var chain: ObservedChain

    /// The most recently seen chain decides: pins must match what the host
    /// serves now. Preference: an intermediate and the root above it (both
    /// outlive the leaf, and a renewed leaf keeps matching); with no
    /// intermediate, the root and the leaf; a lone certificate is pinned alone.
    public static func suggest(for host: ObservedHost, now: Date) -> PinSuggestion? {
        guard let chain = host.chains.first, let leaf = chain.certificates.first else { return nil }
        let above = Array(chain.certificates.dropFirst())
        let intermediate = above.first { !$0.isSelfIssued && $0.notAfter > now }
        let root = above.last { $0.isSelfIssued && $0.notAfter > now } ?? above.last { $0 != intermediate && $0.notAfter > now }
        var choices: [Choice] = []
        var reasons: [String] = []
        let leafDays = days(from: now, to: leaf.notAfter)
        switch (intermediate, root) {
        case let (intermediate?, root?):
            choices = [Choice(certificate: intermediate, role: "intermediate"), Choice(certificate: root, role: "root")]
            reasons.append("an intermediate and the root above it: both outlive the leaf (\(leafDays) days left), so a routine leaf renewal keeps matching")
            reasons.append("two pins, so losing either one still leaves a backup")
        case let (intermediate?, nil):
            choices = [Choice(certificate: intermediate, role: "intermediate"), Choice(certificate: leaf, role: "leaf")]
            reasons.append("the chain seen has no root above its intermediate: the intermediate, and the leaf (\(leafDays) days left) as the backup; add the issuing root when you know it")
        case let (nil, root?):
            choices = [Choice(certificate: root, role: "root"), Choice(certificate: leaf, role: "leaf")]
            reasons.append("the chain seen has no intermediate: the root, and the leaf (\(leafDays) days left) as the backup; replace the leaf pin before it expires")
        case (nil, nil):
            choices = [Choice(certificate: leaf, role: "leaf")]
            reasons.append("the chain seen holds the leaf alone: one pin, no backup; `check` will warn until you add a second")
        }
        if host.chains.count > 1 {
            reasons.append("\(host.chains.count) different chains were seen; this uses the one seen last (\(DateText.format(chain.lastSeen)))")
        }
        return PinSuggestion(host: host.host, policy: host.policy, choices: choices, reasons: reasons, chain: chain)
    }

    /// The YAML block: comments for the why, then a `spki_sha256:` list ready to paste under `pins:`.
    public var yaml: String {
        var lines = ["# \(host) (policy \(policy)): chain seen \(chain.count) time\(chain.count == 1 ? "" : "s"), "
                     + "first \(DateText.format(chain.firstSeen)), last \(DateText.format(chain.lastSeen))"]
        lines += reasons.map { "# \($0)" }
        lines.append("spki_sha256:")
        for choice in choices {
            let c = choice.certificate
            lines.append("  - pin: \"\(c.spkiSHA256)\"")
            // The certificate's own notAfter: a pin must not outlive the key it names.
            lines.append("    not_after: \(DateText.format(c.notAfter))")
            lines.append("    note: \(JSONString.quote("\(choice.role): \(c.subject)"))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func days(from now: Date, to date: Date) -> Int {
        Int((date.timeIntervalSince(now) / 86_400).rounded(.down))
    }
}
