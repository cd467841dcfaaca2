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
    /// The chain the choice is made from.
    public var chain: ObservedChain
    /// Loud lines for a chain that did not pass the pins (refused, or only
    /// reported): printed first, so nobody pastes an interceptor's pins unawares.
    public var warnings: [String] = []

    /// How far a chain's last verdict can be trusted as the host's own: a
    /// match first, then a chain no pin was compared with (the learning
    /// phase), then a reported mismatch, and a refused chain last.
    static func rank(_ verdict: String?) -> Int {
        switch verdict {
        case "match": return 0
        case "unpinned", "no_active_pins", nil: return 1
        case "mismatch_reported": return 2
        default: return 3  // mismatch_enforced
        }
    }

    /// The chain that verified and matched decides, the one seen last among
    /// equals; a chain that matched no pin is used only when nothing better
    /// was seen, and then says so loudly. Preference within it: an
    /// intermediate and the root above it (both outlive the leaf, and a
    /// renewed leaf keeps matching); with no intermediate, the root and the
    /// leaf; a lone certificate is pinned alone.
    public static func suggest(for host: ObservedHost, now: Date) -> PinSuggestion? {
        // `chains` is most recent first; a stable pick of the best rank keeps that order among equals.
        guard let chain = host.chains.enumerated().min(by: { (rank($0.element.verdict), $0.offset) < (rank($1.element.verdict), $1.offset) })?.element,
              let leaf = chain.certificates.first else { return nil }
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
        var warnings: [String] = []
        switch chain.verdict {
        case "mismatch_enforced":
            warnings.append("WARNING: pinproxy REFUSED this chain (pin_mismatch): it matched none of the policy's pins. "
                            + "It may be an interception; compare subject and issuer with the host's real chain before pasting")
        case "mismatch_reported":
            warnings.append("WARNING: this chain matched NONE of the policy's pins (reported, not refused). "
                            + "It may be an interception or a new chain; check subject and issuer before pasting")
        case "unpinned", "no_active_pins":
            reasons.append("the chain verified against the trust store; no active pin was there to compare it with")
        default:
            break
        }
        let others = host.chains.filter { $0 != chain }
        if !others.isEmpty {
            let refused = others.filter { rank($0.verdict) >= 2 }.count
            reasons.append("\(host.chains.count) different chains were seen; this uses the one that "
                           + (chain.verdict == "match" ? "matched the policy's pins" : "passed best")
                           + ", seen last \(DateText.format(chain.lastSeen))"
                           + (refused > 0 ? "; \(refused) other\(refused == 1 ? "" : "s") matched no pin (see `observed` in /policies)" : ""))
        }
        return PinSuggestion(host: host.host, policy: host.policy, choices: choices, reasons: reasons, chain: chain, warnings: warnings)
    }

    /// The YAML block: comments for the why, then a `spki_sha256:` list ready
    /// to paste under `pins:`, every line indented by `indent` spaces (6 puts
    /// it under the `pins:` of a policy in a `hosts:` list).
    public func yaml(indent: Int = 0) -> String {
        var lines = warnings.map { "# \($0)" }
        lines.append("# \(host) (policy \(policy)): chain seen \(chain.count) time\(chain.count == 1 ? "" : "s"), "
                     + "first \(DateText.format(chain.firstSeen)), last \(DateText.format(chain.lastSeen))"
                     + (chain.verdict.map { ", verdict \($0)" } ?? ""))
        lines += reasons.map { "# \($0)" }
        lines.append("spki_sha256:")
        for choice in choices {
            let c = choice.certificate
            lines.append("  - pin: \"\(c.spkiSHA256)\"")
            // The certificate's own notAfter: a pin must not outlive the key it names.
            lines.append("    not_after: \(DateText.format(c.notAfter))")
            lines.append("    note: \(JSONString.quote("\(choice.role): \(c.subject)"))")
        }
        let pad = String(repeating: " ", count: max(0, indent))
        return lines.map { pad + $0 }.joined(separator: "\n") + "\n"
    }

    /// The block without indentation.
    public var yaml: String { yaml(indent: 0) }

    static func days(from now: Date, to date: Date) -> Int {
        Int((date.timeIntervalSince(now) / 86_400).rounded(.down))
    }
}
