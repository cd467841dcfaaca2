import Foundation

/// `pinproxy explain HOST[:PORT]` (docs/contract.md §13): what the serving
/// policy set does with a request for a host at an instant, and why, step by
/// step as the proxy decides it. Pure: snapshot and time come in, so every
/// answer is unit-tested without a listener.
public struct RequestExplanation: Sendable {
    /// One pattern form the matcher looks up for this host, in its order, and the policy holding it.
    public struct Lookup: Sendable, Hashable {
        public var pattern: String
        /// The pattern as a policy wrote it, and its file, when one holds this form.
        public var policy: String?
        public var file: String?
    }

    /// What a request gets, in the contract's terms.
    public enum Answer: Sendable, Hashable {
        /// Refused before anything is dialled: status, X-Pinproxy-Error code, why.
        case refused(status: Int, code: String, reason: String)
        /// CONNECT answered 200 and spliced blindly: no interception, no pins, no token.
        case tunnelled(reason: String)
        /// Intercepted: served if the upstream's chain verifies and the pins allow it.
        case intercepted(reason: String)
    }

    public var host: String
    public var port: Int
    public var at: Date
    /// Every pattern form looked up, in the matcher's order (exact, `*.`, `**.` longest first).
    public var lookups: [Lookup]
    public var policy: HostPolicySpec?
    public var defaultAction: PinproxyConfig.DefaultAction
    public var activePins: [Pin]
    public var inactivePins: [(pin: Pin, why: String)]
    /// `check`'s look-ahead from `at` (PinTimeline), in words.
    public var timelineWarnings: [String]
    public var answer: Answer

    public init(host rawHost: String, port: Int, snapshot: PolicySnapshot, at: Date, horizon: Duration) {
        let host = HostPattern.normalize(rawHost)
        self.host = host
        self.port = port
        self.at = at
        defaultAction = snapshot.defaultAction
        lookups = Self.lookups(for: host).map { form in
            let holder = snapshot.policies.first { $0.spec.match.key == form }
            return Lookup(pattern: form, policy: holder?.spec.match.text, file: holder?.spec.file)
        }
        // Client identities (`explain --client`) slot in here: the client ACL is
        // decided before the host is looked up, and a client refusal wins.
        let spec = snapshot.policy(forHost: host)?.spec
        policy = spec
        let pins = spec?.pins
        activePins = pins?.activePins(at: at) ?? []
        inactivePins = (pins?.pins ?? []).filter { !$0.isActive(at: at) }.map { pin in
            if let start = pin.notBefore, at < start { return (pin, "not yet: from \(DateText.format(start))") }
            return (pin, "expired \(DateText.format(pin.notAfter ?? at))")
        }
        timelineWarnings = pins.map { pinPolicy in
            PinTimeline.findings(pins: pinPolicy.pins, now: at, horizon: horizon).map { finding in
                let when = DateText.format(finding.expiringPin?.notAfter ?? finding.at)
                switch finding.kind {
                case .noBackup: return "fewer than two active pins from \(when): no backup pin"
                case .outage: return "no active pin from \(when)"
                }
            }
        } ?? []
        answer = Self.answer(host: host, port: port, spec: spec, defaultAction: snapshot.defaultAction, at: at)
    }

    /// The forms `HostMatcher.match` tries, in order: the name, `*.` of its
    /// parent, then `**.` of the name and of each parent down to the last label.
    static func lookups(for host: String) -> [String] {
        var forms = [host]
        if let dot = host.firstIndex(of: ".") { forms.append("*." + host[host.index(after: dot)...]) }
        var candidate = Substring(host)
        while true {
            forms.append("**." + candidate)
            guard let dot = candidate.firstIndex(of: ".") else { break }
            candidate = candidate[candidate.index(after: dot)...]
        }
        return forms
    }

    /// The answer to `CONNECT host:port`, as the proxy decides it: the host,
    /// then the policy's `ports:`, then the pins.
    static func answer(host: String, port: Int, spec: HostPolicySpec?, defaultAction: PinproxyConfig.DefaultAction, at: Date) -> Answer {
        guard let spec else {
            switch defaultAction {
            case .deny:
                return .refused(status: 403, code: "host_denied", reason: "no policy matches \(host) and default_action is deny")
            case .tunnel:
                return .tunnelled(reason: "no policy matches \(host) and default_action is tunnel: a CONNECT is spliced blindly "
                                  + "(no interception, no pins, no token); an absolute-form http:// request is forwarded as it is")
            }
        }
        let origin = "policy \(spec.match.text) (\(spec.file))"
        switch spec.action {
        case .deny:
            return .refused(status: 403, code: "host_denied", reason: "\(origin) denies \(host)")
        case .tunnel:
            if let refused = portRefused(host: host, port: port, spec: spec) { return refused }
            return .tunnelled(reason: "\(origin) tunnels \(host): the CONNECT gets 200 and the bytes are spliced unread (no pins, no token)")
        case .intercept:
            if let refused = portRefused(host: host, port: port, spec: spec) { return refused }
            guard let pins = spec.pins else {
                return .intercepted(reason: "\(origin) intercepts \(host) without pins: served when the upstream chain verifies")
            }
            let active = pins.activePins(at: at)
            if active.isEmpty {
                if pins.onExpiry == .fail && pins.mode == .enforce {
                    return .refused(status: 502, code: "pins_expired",
                                    reason: "\(origin) has no active pin at \(DateText.format(at)) and on_expiry is fail")
                }
                return .intercepted(reason: "\(origin) has no active pin at \(DateText.format(at)): the verified chain alone is trusted "
                                    + (pins.mode == .report ? "(mode report)" : "(on_expiry chain_only)"))
            }
            let count = "\(active.count) active pin\(active.count == 1 ? "" : "s")"
            if let window = pins.transition, window.contains(at) {
                return .intercepted(reason: "\(origin) intercepts \(host); inside the transition window a chain matching none of its "
                                    + "\(count) is reported, not refused")
            }
            if pins.mode == .report {
                return .intercepted(reason: "\(origin) intercepts \(host) in report mode: a chain matching none of its \(count) is logged, not refused")
            }
            return .intercepted(reason: "\(origin) intercepts \(host): served when the upstream chain verifies and matches one of its "
                                + "\(count); otherwise 502 pin_mismatch")
        }
    }

    /// 403 `port_denied` when the policy's `ports:` leave out `port` for a
    /// CONNECT; an http:// request may still reach it (80 by default), and
    /// the reason says so.
    static func portRefused(host: String, port: Int, spec: HostPolicySpec) -> Answer? {
        guard let refusal = spec.portRefusal(host: host, port: port, kind: .connect) else { return nil }
        let absolute = spec.portRefusal(host: host, port: port, kind: .absoluteForm) == nil
            ? "; an absolute-form http://\(host):\(port)/ request is allowed" : ""
        return .refused(status: 403, code: "port_denied", reason: refusal + absolute)
    }

    /// The answer in one line, e.g. `403 host_denied: no policy matches x and default_action is deny`.
    public var answerText: String {
        switch answer {
        case .refused(let status, let code, let reason): return "\(status) \(code): \(reason)"
        case .tunnelled(let reason): return "tunnelled: \(reason)"
        case .intercepted(let reason): return "intercepted: \(reason)"
        }
    }
}
