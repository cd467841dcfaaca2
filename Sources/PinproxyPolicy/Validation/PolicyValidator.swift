import Foundation

/// Checks that need more than one value: duplicate patterns across files,
/// sessions named by policies, windows already over, and the pin timeline.
/// Per-value problems were reported by the readers as they went.
struct PolicyValidator {
    let config: PinproxyConfig
    let now: Date
    let horizon: Duration

    func validate(_ specs: [HostPolicySpec], into bag: DiagnosticBag) {
        var seen: [String: HostPolicySpec] = [:]
        for spec in specs {
            if let first = seen[spec.match.key] {
                bag.error(spec.location, "duplicate host pattern `\(spec.match.text)`: already defined at \(first.location)")
            } else {
                seen[spec.match.key] = spec
            }
            validateAuth(spec, into: bag)
            validateClients(spec, into: bag)
            if spec.action == .intercept {
                validateEnforcement(spec, into: bag)
            }
            if let pins = spec.pins {
                validateWindow(spec, pins, into: bag)
                timeline(spec, pins, into: bag)
            }
        }
    }

    private func validateAuth(_ spec: HostPolicySpec, into bag: DiagnosticBag) {
        guard let auth = spec.auth else { return }
        CredentialNames(config: config).validate(auth, spec.sourceMap, into: bag)
        if spec.action != .intercept {
            bag.warning(spec.sourceMap["auth"], "`auth` has no effect with `action: \(spec.action.rawValue)`: only intercepted requests carry tokens")
        } else if spec.pins == nil, !auth.attachUnpinned {
            bag.warning(spec.sourceMap["auth"], "`\(spec.match.text)` has no pins, so no token will be attached: set `attach_unpinned: true` to trust the verified chain alone")
        }
    }

    /// Every identity a policy's `clients:` names must exist in the main
    /// file: a typo would otherwise refuse the app it was meant to admit.
    private func validateClients(_ spec: HostPolicySpec, into bag: DiagnosticBag) {
        guard let rules = spec.clients else { return }
        if rules.isEmpty {
            bag.warning(spec.sourceMap["clients"], "`clients: []` admits no client at all: `\(spec.match.text)` is refused to everyone")
        }
        let known = config.identities.keys.sorted()
        for rule in rules {
            guard case .identity(let name) = rule.kind, config.identities[name] == nil else { continue }
            // Written but invalid: its own error says why; not a second one here.
            if config.sourceMap.isWritten("clients.identities.\(name)") { continue }
            var message = "`clients` names identity `\(name)`, which `clients.identities` of the main file does not define"
            if let suggestion = KeySuggestion.nearest(to: name, in: known) {
                message += "; did you mean `\(suggestion)`?"
            } else {
                message += known.isEmpty ? " (it defines none)" : " (known: \(known.joined(separator: ", ")))"
            }
            bag.error(rule.location, message + "; a network must be written as a CIDR such as 10.0.0.0/8")
        }
        if spec.action == .deny, spec.clients != nil {
            bag.warning(spec.sourceMap["clients"], "`clients` has no effect with `action: deny`: everyone is refused")
        }
    }

    /// An intercepted host whose pins would not refuse anything: a CI gate
    /// (`check --strict`) must see each such policy, even when it is meant.
    private func validateEnforcement(_ spec: HostPolicySpec, into bag: DiagnosticBag) {
        let host = "`\(spec.match.text)`"
        guard let pins = spec.pins else {
            bag.warning(spec.location, "\(host) is intercepted without `pins`: any certificate that verifies for the name is trusted (chain only)")
            return
        }
        if pins.mode == .report {
            bag.warning(spec.sourceMap["pins.mode"], "\(host) pins are in report mode: a mismatch is logged and counted, never refused; set `mode: enforce` once no mismatch is reported")
        }
        if !spec.upgradeToTLS {
            // Absolute-form requests (`GET http://host/…` through HTTP_PROXY)
            // never see a TLS handshake, so no pin is ever checked for them.
            let location = spec.sourceMap.isWritten("upgrade_to_tls") ? spec.sourceMap["upgrade_to_tls"] : spec.location
            bag.warning(location, "\(host) is pinned, but plain `http://` requests for it (through HTTP_PROXY) bypass its pins and TLS settings: set `upgrade_to_tls: true` to send them upstream over pinned TLS")
        }
    }

    private func validateWindow(_ spec: HostPolicySpec, _ pins: PinPolicy, into bag: DiagnosticBag) {
        guard let window = pins.transition, window.until < now else { return }
        bag.warning(window.location, "transition window of `\(spec.match.text)` ended \(DateText.format(window.until)): mismatches are enforced again; remove it")
    }

    /// Enforce-mode policies only: a report-mode policy never refuses.
    private func timeline(_ spec: HostPolicySpec, _ pins: PinPolicy, into bag: DiagnosticBag) {
        guard pins.mode == .enforce else { return }
        let host = "`\(spec.match.text)`"
        for finding in PinTimeline.findings(pins: pins.pins, now: now, horizon: horizon) {
            let location = finding.expiringPin?.location ?? pins.location
            // Name the expiring pin's own last instant: the date the file says.
            let when = finding.expiringPin.map { pin in
                "after \(DateText.format(pin.notAfter!)), when pin \(pin.hash.prefix(12))…\(pin.note.map { " (\($0))" } ?? "") expires"
            } ?? "as of \(DateText.format(finding.at))"
            switch finding.kind {
            case .noBackup:
                bag.warning(location, "\(host) has no backup pin \(when): fewer than two active pins (enforce mode)")
            case .outage:
                let effect = pins.onExpiry == .fail
                    ? "every connection will be refused with pins_expired (outage)"
                    : "pinning stops and the verified chain alone is trusted (on_expiry: chain_only)"
                bag.warning(location, "\(host) has no active pin \(when): \(effect)")
            }
        }
    }
}
