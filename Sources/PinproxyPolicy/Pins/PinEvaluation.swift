import Foundation

/// The hashes of one certificate of a verified chain, as pins are written.
public struct ObservedCertificate: Sendable, Hashable {
    /// Base64 SHA-256 of the SubjectPublicKeyInfo DER (`Certificate.spkiSHA256`).
    public var spkiSHA256: String
    /// Base64 SHA-256 of the whole certificate DER (`Certificate.certificateSHA256`).
    public var certificateSHA256: String
    /// For the log line and the refusal only (`CN=…`); never matched on.
    public var subject: String?
    /// Who signed it, for the same lines: with the subject it tells a renewal
    /// by the usual CA from a chain issued by an interceptor at a glance.
    public var issuer: String?

    public init(spkiSHA256: String, certificateSHA256: String, subject: String? = nil, issuer: String? = nil) {
        self.spkiSHA256 = spkiSHA256
        self.certificateSHA256 = certificateSHA256
        self.subject = subject
        self.issuer = issuer
    }

    /// `sha256/PIN (subject CN=…, issuer CN=…)`: one certificate of a mismatch
    /// answer or probe detail (docs/contract.md §3 "Pin evaluation").
    public var described: String {
        var names: [String] = []
        if let subject { names.append("subject \(subject)") }
        if let issuer { names.append("issuer \(issuer)") }
        return "sha256/" + spkiSHA256 + (names.isEmpty ? "" : " (" + names.joined(separator: ", ") + ")")
    }
}

/// What pin evaluation decided (docs/contract.md §3 "Pin evaluation", steps 2–5).
/// Step 1 (OpenSSL's chain and hostname verification) has already passed.
public enum PinVerdict: Sendable, Hashable {
    public enum ReportReason: String, Sendable, Hashable {
        /// `mode: report`.
        case reportMode = "report_mode"
        /// Inside the declared `transition` window.
        case transitionWindow = "transition_window"
    }

    public enum NoActivePinsOutcome: String, Sendable, Hashable {
        /// `on_expiry: fail`: refused with `pins_expired`.
        case enforced
        /// `on_expiry: chain_only` (or `mode: report`): goes on with chain verification alone.
        case chainOnly = "chain_only"
    }

    /// An active pin equals a hash of the chain.
    case match(Pin)
    /// No active pin matched and nothing excuses it: `pin_mismatch`.
    case mismatchEnforced
    /// No active pin matched; the request goes on with a warning.
    case mismatchReported(reason: ReportReason)
    /// The policy has pins, but none is active now.
    case noActivePins(NoActivePinsOutcome)
    /// The policy has no `pins:` at all: chain-only by intent.
    case unpinned

    /// `pinproxy_pin_validations_total{result=…}`.
    public var metricLabel: String {
        switch self {
        case .match: return "match"
        case .mismatchEnforced: return "mismatch_enforced"
        case .mismatchReported: return "mismatch_reported"
        case .noActivePins: return "no_active_pins"
        case .unpinned: return "unpinned"
        }
    }

    /// The refusal code (`X-Pinproxy-Error`, `upstream_handshakes_total`) when
    /// the handshake must fail; nil when the connection may be used.
    public var refusalCode: RefusalCode? {
        switch self {
        case .mismatchEnforced: return .pinMismatch
        case .noActivePins(.enforced): return .pinsExpired
        case .match, .mismatchReported, .noActivePins(.chainOnly), .unpinned: return nil
        }
    }

    public var allowsConnection: Bool { refusalCode == nil }

    /// Whether a bearer token may be attached on a connection with this
    /// verdict (docs/contract.md §7): after a match or inside a transition window; after
    /// a report-mode mismatch or with chain-only trust only if `attachUnpinned`.
    public func permitsTokenAttachment(attachUnpinned: Bool) -> Bool {
        switch self {
        case .match, .mismatchReported(reason: .transitionWindow): return true
        case .mismatchReported(reason: .reportMode), .noActivePins(.chainOnly), .unpinned: return attachUnpinned
        case .mismatchEnforced, .noActivePins(.enforced): return false
        }
    }
}

/// A verdict and the evidence: the pins the chain actually carried, leaf to
/// root, for the log line that lets a security team tell rotation from attack.
public struct PinEvaluation: Sendable, Hashable {
    public var verdict: PinVerdict
    public var observed: [ObservedCertificate]
    /// The pins that were active at evaluation time.
    public var activePins: [Pin]

    /// Observed SPKI pins as `sha256/BASE64`, leaf first, for logs.
    public var observedPins: [String] { observed.map { "sha256/" + $0.spkiSHA256 } }

    /// The chain seen, leaf to root, each certificate with its pin, subject
    /// and issuer: what a refusal's detail and a probe's detail print.
    public var observedChain: String { observed.map(\.described).joined(separator: ", ") }
}

/// Pin evaluation as a pure function of the chain, the policy and the time.
public enum PinEvaluator {
    public static func evaluate(chain: [ObservedCertificate], pins policy: PinPolicy?, now: Date) -> PinEvaluation {
        guard let policy else {
            return PinEvaluation(verdict: .unpinned, observed: chain, activePins: [])
        }
        let active = policy.activePins(at: now)
        let verdict: PinVerdict
        if active.isEmpty {
            // Report mode never blocks, whatever `on_expiry` says.
            verdict = .noActivePins(policy.onExpiry == .fail && policy.mode == .enforce ? .enforced : .chainOnly)
        } else if let pin = active.first(where: { pin in chain.contains { matches(pin, $0) } }) {
            verdict = .match(pin)
        } else if let window = policy.transition, window.contains(now) {
            verdict = .mismatchReported(reason: .transitionWindow)
        } else if policy.mode == .report {
            verdict = .mismatchReported(reason: .reportMode)
        } else {
            verdict = .mismatchEnforced
        }
        return PinEvaluation(verdict: verdict, observed: chain, activePins: active)
    }

    private static func matches(_ pin: Pin, _ certificate: ObservedCertificate) -> Bool {
        switch pin.kind {
        case .spki: return pin.hash == certificate.spkiSHA256
        case .certificate: return pin.hash == certificate.certificateSHA256
        }
    }
}
