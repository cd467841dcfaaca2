import Foundation
import PinproxyPolicy

/// One host policy in `GET /policies`: what it is, where it came from, and
/// what it enforces right now, so an operator can see that a host is
/// report-only or unpinned without reading the YAML. Paths and patterns
/// only: nothing secret is reachable from here.
struct HostDocument: Encodable {
    var match: String
    var action: String
    var file: String
    var digest: String
    /// `HOST:PORT` dialled instead of the host, in order; empty: the host itself.
    var upstream: [String]
    var upgradeToTLS: Bool
    var tls: TLSDocument
    /// nil for `tunnel` and `deny`: no pin is ever evaluated for them.
    var enforcement: EnforcementDocument?
    var pins: [PinDocument]
    var timelineWarning: String?
    var probe: ProbeDocument
    /// Which credential requests carry (names, never values); nil without `auth:`.
    var auth: AuthDocument?

    init(policy: HostPolicy, now: Date, horizon: Duration, probe: ProbeStatus?) {
        match = policy.metricLabel
        action = policy.action.rawValue
        file = policy.file
        digest = policy.digest
        upstream = policy.upstream.map(\.description)
        upgradeToTLS = policy.upgradeToTLS
        tls = TLSDocument(policy.tls)
        enforcement = policy.action == .intercept ? EnforcementDocument(policy.pins, now: now) : nil
        pins = policy.pins?.pins.map { PinDocument(pin: $0, now: now) } ?? []
        timelineWarning = policy.pins.flatMap { Self.timelineWarning($0, now: now, horizon: horizon) }
        self.probe = ProbeDocument(probe)
        auth = policy.auth.map(AuthDocument.init)
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
        try c.encode(upstream, forKey: .upstream)
        try c.encode(upgradeToTLS, forKey: .upgradeToTLS)
        try c.encode(tls, forKey: .tls)
        try c.encode(enforcement, forKey: .enforcement)
        try c.encode(pins, forKey: .pins)
        try c.encode(timelineWarning, forKey: .timelineWarning)
        try c.encode(probe, forKey: .probe)
        // Only for a policy with `auth:` (docs/contract.md §5).
        try c.encodeIfPresent(auth, forKey: .auth)
    }

    enum CodingKeys: String, CodingKey {
        case match, action, file, digest, upstream, tls, enforcement, pins, probe, auth
        case upgradeToTLS = "upgrade_to_tls"
        case timelineWarning = "timeline_warning"
    }
}

/// `tls`: the upstream leg's settings as the policy gives them (null: OpenSSL's
/// default, or the system trust store for `ca_file`).
struct TLSDocument: Encodable {
    var minVersion: String
    var maxVersion: String?
    var allowLegacyTLS: Bool
    var ciphers: String?
    var ciphersuites: String?
    var caFile: String?
    var clientCert: String?

    init(_ tls: TLSPolicy) {
        minVersion = tls.minimumVersion.rawValue
        maxVersion = tls.maximumVersion?.rawValue
        allowLegacyTLS = tls.allowLegacyTLS
        ciphers = tls.ciphers
        ciphersuites = tls.ciphersuites
        caFile = tls.caFile
        clientCert = tls.clientCertificate
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(minVersion, forKey: .minVersion)
        try c.encode(maxVersion, forKey: .maxVersion)
        try c.encode(allowLegacyTLS, forKey: .allowLegacyTLS)
        try c.encode(ciphers, forKey: .ciphers)
        try c.encode(ciphersuites, forKey: .ciphersuites)
        try c.encode(caFile, forKey: .caFile)
        try c.encode(clientCert, forKey: .clientCert)
    }

    enum CodingKeys: String, CodingKey {
        case ciphers, ciphersuites
        case minVersion = "min_version"
        case maxVersion = "max_version"
        case allowLegacyTLS = "allow_legacy_tls"
        case caFile = "ca_file"
        case clientCert = "client_cert"
    }
}

/// `enforcement`: the pin rules of an intercepted host and what a chain that
/// matches no pin gets at this moment (`in_effect`).
struct EnforcementDocument: Encodable {
    /// What happens now to a verified chain that matches no active pin.
    enum InEffect: String, Encodable {
        /// Refused with `pin_mismatch`.
        case enforce
        /// Goes on, logged and counted as `mismatch_reported` (`mode: report`).
        case reportMode = "report_mode"
        /// Goes on, logged and counted as `mismatch_reported` (inside `transition`).
        case transitionWindow = "transition_window"
        /// No pin is active and `on_expiry: fail`: every connection is refused (`pins_expired`).
        case pinsExpired = "pins_expired"
        /// No pin is active and `on_expiry: chain_only` (or report mode): the verified chain alone.
        case chainOnly = "chain_only"
        /// No `pins:` at all: the verified chain alone, by intent.
        case unpinned
    }

    var mode: String?
    var onExpiry: String?
    var transition: TransitionDocument?
    var inEffect: InEffect

    init(_ pins: PinPolicy?, now: Date) {
        guard let pins else {
            inEffect = .unpinned
            return
        }
        mode = pins.mode.rawValue
        onExpiry = pins.onExpiry.rawValue
        transition = pins.transition.map { TransitionDocument($0, now: now) }
        // The order of `PinEvaluator.evaluate`, for a chain that matches nothing.
        if pins.activePins(at: now).isEmpty {
            inEffect = pins.onExpiry == .fail && pins.mode == .enforce ? .pinsExpired : .chainOnly
        } else if pins.transition?.contains(now) == true {
            inEffect = .transitionWindow
        } else {
            inEffect = pins.mode == .report ? .reportMode : .enforce
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(mode, forKey: .mode)
        try c.encode(onExpiry, forKey: .onExpiry)
        try c.encode(transition, forKey: .transition)
        try c.encode(inEffect, forKey: .inEffect)
    }

    enum CodingKeys: String, CodingKey {
        case mode, transition
        case onExpiry = "on_expiry"
        case inEffect = "in_effect"
    }
}

struct TransitionDocument: Encodable {
    var from: String
    var until: String
    var active: Bool

    init(_ window: TimeWindow, now: Date) {
        from = DateText.format(window.from)
        until = DateText.format(window.until)
        active = window.contains(now)
    }
}

struct PinDocument: Encodable {
    var kind: String
    var pin: String
    var notBefore: String?
    var notAfter: String?
    var active: Bool
    var note: String?

    init(pin: Pin, now: Date) {
        kind = pin.kind.rawValue
        self.pin = pin.hash
        notBefore = pin.notBefore.map(DateText.format)
        notAfter = pin.notAfter.map(DateText.format)
        active = pin.isActive(at: now)
        note = pin.note
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kind, forKey: .kind)
        try c.encode(pin, forKey: .pin)
        try c.encode(notBefore, forKey: .notBefore)
        try c.encode(notAfter, forKey: .notAfter)
        try c.encode(active, forKey: .active)
        try c.encode(note, forKey: .note)
    }

    enum CodingKeys: String, CodingKey {
        case kind, pin, active, note
        case notBefore = "not_before"
        case notAfter = "not_after"
    }
}

/// `probe`: the last active probe. `success` says whether the handshake
/// passed the policy (a request would have been served); `verdict` says how
/// the pins judged it, so a probe let through by report mode or a transition
/// window still shows `mismatch_reported`.
struct ProbeDocument: Encodable {
    var success: Bool?
    var at: String?
    var leafNotAfter: String?
    var verdict: String?
    var error: String?
    var detail: String?

    init(_ probe: ProbeStatus?) {
        success = probe?.success
        at = probe.map { DateText.format($0.at) }
        leafNotAfter = probe?.leafNotAfter.map(DateText.format)
        verdict = probe?.verdict
        error = probe?.error
        detail = probe?.detail
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(success, forKey: .success)
        try c.encode(at, forKey: .at)
        try c.encode(leafNotAfter, forKey: .leafNotAfter)
        try c.encode(verdict, forKey: .verdict)
        try c.encode(error, forKey: .error)
        try c.encode(detail, forKey: .detail)
    }

    enum CodingKeys: String, CodingKey {
        case success, at, verdict, error, detail
        case leafNotAfter = "leaf_not_after"
    }
}

/// `auth`: the credential a request gets (or one per client identity), the
/// header and its format, and when it is withheld. Names only.
struct AuthDocument: Encodable {
    var credential: String?
    var byClient: [String: String]?
    var fallback: String?
    var require: Bool?
    var header: String
    var format: String
    var replaceClientAuth: Bool
    var attachUnpinned: Bool
    var throttleQueue: Int

    init(_ auth: AuthPolicy) {
        switch auth.choice {
        case .named(let name):
            credential = name
        case .byClient(let map, let fallback, let require):
            byClient = map
            self.fallback = fallback ?? "none"
            self.require = require
        }
        header = auth.header
        format = auth.format
        replaceClientAuth = auth.replaceClientAuth
        attachUnpinned = auth.attachUnpinned
        throttleQueue = auth.throttleQueue
    }

    enum CodingKeys: String, CodingKey {
        case credential, header, format, require
        case byClient = "by_client"
        case fallback = "default"
        case replaceClientAuth = "replace_client_auth"
        case attachUnpinned = "attach_unpinned"
        case throttleQueue = "throttle_queue"
    }
}
