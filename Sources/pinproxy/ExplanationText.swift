import Foundation
import PinproxyPolicy

/// `explain`'s text: labelled lines, aligned, the answer last (docs/contract.md §13).
enum ExplanationText {
    static func render(_ e: RequestExplanation, files: [String]) -> String {
        var lines: [String] = []
        func field(_ name: String, _ value: String) { lines.append(name.padding(toLength: 10, withPad: " ", startingAt: 0) + value) }
        lines.append("explain \(e.host):\(e.port) at \(DateText.format(e.at)) (\(files.count) configuration file\(files.count == 1 ? "" : "s"))")
        lines.append("patterns considered, in the matcher's order:")
        let width = max(24, (e.lookups.map(\.pattern.count).max() ?? 0) + 2)
        var matched = false
        for lookup in e.lookups {
            let holder: String
            if let policy = lookup.policy, let file = lookup.file {
                holder = "policy \(policy) (\(file))" + (matched ? ", not reached" : "  <- matches")
                matched = true
            } else {
                holder = "no policy"
            }
            lines.append("  " + lookup.pattern.padding(toLength: width, withPad: " ", startingAt: 0) + holder)
        }
        guard let spec = e.policy else {
            field("policy:", "none; default_action is \(e.defaultAction.rawValue)")
            field("answer:", e.answerText)
            return lines.joined(separator: "\n") + "\n"
        }
        let location = spec.location
        field("policy:", "\(spec.match.text) (\(location.file):\(location.line):\(location.column))")
        field("action:", spec.action.rawValue)
        if spec.action != .deny { field("ports:", spec.portsText) }
        if !spec.upstream.isEmpty { field("upstream:", spec.upstream.map(\.description).joined(separator: ", ")) }
        if spec.action == .intercept {
            field("tls:", tlsLine(spec.tls))
            lines += pinLines(e, spec: spec)
            field("token:", tokenLine(spec))
        }
        field("answer:", e.answerText)
        return lines.joined(separator: "\n") + "\n"
    }

    static func tlsLine(_ tls: TLSPolicy) -> String {
        var parts = ["min \(tls.minimumVersion.rawValue)", "max \(tls.maximumVersion?.rawValue ?? "OpenSSL's highest")"]
        if tls.allowLegacyTLS { parts.append("legacy TLS allowed") }
        parts.append("ciphers \(tls.ciphers ?? "OpenSSL's default")")
        if let suites = tls.ciphersuites { parts.append("ciphersuites \(suites)") }
        parts.append("trust \(tls.caFile ?? "the system store")")
        if let cert = tls.clientCertificate { parts.append("client certificate \(cert)") }
        return parts.joined(separator: ", ")
    }

    static func pinLines(_ e: RequestExplanation, spec: HostPolicySpec) -> [String] {
        var lines: [String] = []
        func field(_ name: String, _ value: String) { lines.append(name.padding(toLength: 10, withPad: " ", startingAt: 0) + value) }
        guard let pins = spec.pins else {
            return ["pins:     none: the verified chain alone is trusted"]
        }
        var mode = "mode \(pins.mode.rawValue), on_expiry \(pins.onExpiry.rawValue)"
        if let window = pins.transition {
            mode += ", transition \(DateText.format(window.from)) to \(DateText.format(window.until))"
                + (window.contains(e.at) ? " (in effect)" : "")
        }
        field("pins:", mode + "; \(e.activePins.count) active at \(DateText.format(e.at))")
        for pin in e.activePins {
            let until = pin.notAfter.map { "until \(DateText.format($0))" } ?? "no end"
            lines.append("  active    \(pin.kind.rawValue) \(pin.hash)  \(until)" + (pin.note.map { "  (\($0))" } ?? ""))
        }
        for (pin, why) in e.inactivePins {
            lines.append("  inactive  \(pin.kind.rawValue) \(pin.hash)  \(why)" + (pin.note.map { "  (\($0))" } ?? ""))
        }
        if e.timelineWarnings.isEmpty {
            field("timeline:", "at least two active pins over the look-ahead")
        }
        for warning in e.timelineWarnings { field("timeline:", "warning: \(warning)") }
        return lines
    }

    static func tokenLine(_ spec: HostPolicySpec) -> String {
        guard let auth = spec.auth else { return "none: no auth in the policy" }
        var text: String
        switch auth.choice {
        case .named(let name):
            text = "credential \(name)"
        case .byClient(let map, let fallback, let require):
            let pairs = map.sorted { $0.key < $1.key }.map { "\($0.key) → \($0.value)" }.joined(separator: ", ")
            text = "by client: \(pairs); other clients: \(fallback ?? (require ? "refused 403 client_denied" : "none"))"
        }
        text += " into \(auth.header) as \"\(auth.format)\""
        text += auth.replaceClientAuth ? ", the client's own Authorization removed" : ", replace_client_auth off"
        text += auth.attachUnpinned ? "; attached even when no pin vouched for the chain" : "; attached only after a pin match (or a mismatch inside the transition window), never to TRACE"
        return text
    }
}
