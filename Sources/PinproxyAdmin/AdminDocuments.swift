import Foundation
import PinproxyPolicy

// The JSON the admin API answers with. Every optional is written as `null`
// rather than left out, so a client sees the same keys whatever is unknown
// (DESIGN §10 `/policies` shape). Dates are RFC 3339 in UTC. Nothing secret
// is reachable from these types: they copy patterns, paths, digests and pins.

/// `GET /policies`.
struct PoliciesDocument: Encodable {
    var hosts: [HostDocument]
    var lastReload: LastReloadDocument

    init(snapshot: PolicySnapshot, lastReload: ReloadInfo?, now: Date, horizon: Duration,
         probe: (String) -> ProbeStatus?) {
        hosts = snapshot.policies.map { HostDocument(policy: $0, now: now, horizon: horizon, probe: probe($0.metricLabel)) }
        self.lastReload = LastReloadDocument(lastReload)
    }

    enum CodingKeys: String, CodingKey {
        case hosts
        case lastReload = "last_reload"
    }
}

struct HostDocument: Encodable {
    var match: String
    var action: String
    var file: String
    var digest: String
    var pins: [PinDocument]
    var timelineWarning: String?
    var probe: ProbeDocument

    init(policy: HostPolicy, now: Date, horizon: Duration, probe: ProbeStatus?) {
        match = policy.metricLabel
        action = policy.action.rawValue
        file = policy.file
        digest = policy.digest
        pins = policy.pins?.pins.map { PinDocument(pin: $0, now: now) } ?? []
        timelineWarning = policy.pins.flatMap { Self.timelineWarning($0, now: now, horizon: horizon) }
        self.probe = ProbeDocument(probe)
    }

    /// The first moment within the horizon the policy loses its backup pin or
    /// every pin, as `check` warns (enforce mode only; report mode never refuses).
    static func timelineWarning(_ pins: PinPolicy, now: Date, horizon: Duration) -> String? {
        guard pins.mode == .enforce,
              let finding = PinTimeline.findings(pins: pins.pins, now: now, horizon: horizon).first else { return nil }
        let when = DateText.format(finding.expiringPin?.notAfter ?? finding.at)
        let phrase = finding.expiringPin == nil ? "as of \(when)" : "after \(when)"
        switch finding.kind {
        case .noBackup:
            return "no backup pin \(phrase): fewer than two active pins"
        case .outage:
            return pins.onExpiry == .fail
                ? "no active pin \(phrase): connections will be refused with pins_expired"
                : "no active pin \(phrase): only the verified chain will be trusted (on_expiry: chain_only)"
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(match, forKey: .match)
        try c.encode(action, forKey: .action)
        try c.encode(file, forKey: .file)
        try c.encode(digest, forKey: .digest)
        try c.encode(pins, forKey: .pins)
        try c.encode(timelineWarning, forKey: .timelineWarning)
        try c.encode(probe, forKey: .probe)
    }

    enum CodingKeys: String, CodingKey {
        case match, action, file, digest, pins, probe
        case timelineWarning = "timeline_warning"
    }
}

struct PinDocument: Encodable {
    var kind: String
    var pin: String
    var notBefore: String?
    var notAfter: String?
    var active: Bool

    init(pin: Pin, now: Date) {
        kind = pin.kind.rawValue
        self.pin = pin.hash
        notBefore = pin.notBefore.map(DateText.format)
        notAfter = pin.notAfter.map(DateText.format)
        active = pin.isActive(at: now)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kind, forKey: .kind)
        try c.encode(pin, forKey: .pin)
        try c.encode(notBefore, forKey: .notBefore)
        try c.encode(notAfter, forKey: .notAfter)
        try c.encode(active, forKey: .active)
    }

    enum CodingKeys: String, CodingKey {
        case kind, pin, active
        case notBefore = "not_before"
        case notAfter = "not_after"
    }
}

struct ProbeDocument: Encodable {
    var success: Bool?
    var at: String?
    var leafNotAfter: String?

    init(_ probe: ProbeStatus?) {
        success = probe?.success
        at = probe.map { DateText.format($0.at) }
        leafNotAfter = probe?.leafNotAfter.map(DateText.format)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(success, forKey: .success)
        try c.encode(at, forKey: .at)
        try c.encode(leafNotAfter, forKey: .leafNotAfter)
    }

    enum CodingKeys: String, CodingKey {
        case success, at
        case leafNotAfter = "leaf_not_after"
    }
}

/// `last_reload`: all null before the first reload (the start's load is not one).
struct LastReloadDocument: Encodable {
    var at: String?
    var result: String?
    var errors: [DiagnosticDocument]

    init(_ info: ReloadInfo?) {
        at = info.map { DateText.format($0.at) }
        result = info?.result.rawValue
        errors = info?.errors.map(DiagnosticDocument.init) ?? []
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(at, forKey: .at)
        try c.encode(result, forKey: .result)
        try c.encode(errors, forKey: .errors)
    }

    enum CodingKeys: String, CodingKey { case at, result, errors }
}

/// One error or warning, as `check --format json` prints it.
struct DiagnosticDocument: Encodable {
    var file: String
    var line: Int
    var column: Int
    var message: String

    init(_ diagnostic: Diagnostic) {
        file = diagnostic.file
        line = diagnostic.line
        column = diagnostic.column
        message = diagnostic.message
    }
}

/// `POST /reload`: 200 with the new set's size and warnings, or 422 with
/// every error while the previous set keeps serving (`hosts` is its size).
struct ReloadDocument: Encodable {
    var result: String
    var at: Date
    var hosts: Int
    var errors: [DiagnosticDocument]
    var warnings: [DiagnosticDocument]

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(result, forKey: .result)
        try c.encode(DateText.format(at), forKey: .at)
        try c.encode(hosts, forKey: .hosts)
        try c.encode(errors, forKey: .errors)
        try c.encode(warnings, forKey: .warnings)
    }

    enum CodingKeys: String, CodingKey { case result, at, hosts, errors, warnings }
}

/// `GET /readyz`.
struct ReadinessDocument: Encodable {
    var status: ReadinessStatus
    var details: [String]

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(status.isReady ? "ready" : "not_ready", forKey: .status)
        try c.encode(status.missing, forKey: .missing)
        try c.encode([
            "listening": status.listening, "policy_loaded": status.policyLoaded, "ca_usable": status.caUsable,
            "accepting": status.accepting,
        ], forKey: .checks)
        try c.encode(details, forKey: .details)
    }

    enum CodingKeys: String, CodingKey { case status, missing, checks, details }
}
