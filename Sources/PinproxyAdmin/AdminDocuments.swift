import Foundation
import PinproxyPolicy

// The JSON the admin API answers with. Every optional is written as `null`
// rather than left out, so a client sees the same keys whatever is unknown
// (docs/contract.md §10 `/policies` shape). Dates are RFC 3339 in UTC. Nothing secret
// is reachable from these types: they copy patterns, paths, digests and pins.

/// `GET /policies`.
struct PoliciesDocument: Encodable {
    var hosts: [HostDocument]
    var lastReload: LastReloadDocument
    /// Chains seen upstream, per host name (docs/contract.md §13).
    var observed: [ObservedHostDocument]

    init(snapshot: PolicySnapshot, lastReload: ReloadInfo?, now: Date, horizon: Duration,
         probe: (String) -> ProbeStatus?, observed: [ObservedHost] = []) {
        hosts = snapshot.policies.map { HostDocument(policy: $0, now: now, horizon: horizon, probe: probe($0.metricLabel)) }
        self.lastReload = LastReloadDocument(lastReload)
        self.observed = observed.map(ObservedHostDocument.init)
    }

    enum CodingKeys: String, CodingKey {
        case hosts, observed
        case lastReload = "last_reload"
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
