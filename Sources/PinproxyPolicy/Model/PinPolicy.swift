import Foundation
import PinproxyTLS

/// The `pins:` section of a host policy (docs/contract.md §3 "Pin evaluation").
public struct PinPolicy: Sendable, Hashable {
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// A mismatch fails the handshake (`pin_mismatch`).
        case enforce
        /// A mismatch is logged and counted; the request goes on.
        case report
    }

    /// What happens when no pin is active any more. `fail` is the default on
    /// purpose: a central proxy can be updated, and `check` warns a month ahead.
    public enum OnExpiry: String, Sendable, Hashable, CaseIterable {
        case fail
        case chainOnly = "chain_only"
    }

    public var mode: Mode
    /// `spki_sha256` entries, then `cert_sha256` entries, in file order.
    public var pins: [Pin]
    public var transition: TimeWindow?
    public var onExpiry: OnExpiry
    /// The `pins` key, for warnings about the set as a whole.
    public var location: SourceLocation

    public init(mode: Mode = .enforce, pins: [Pin], transition: TimeWindow? = nil,
                onExpiry: OnExpiry = .fail, location: SourceLocation = .embeddedDefaults) {
        self.mode = mode
        self.pins = pins
        self.transition = transition
        self.onExpiry = onExpiry
        self.location = location
    }

    /// The pins whose validity contains `now`.
    public func activePins(at now: Date) -> [Pin] {
        pins.filter { $0.isActive(at: now) }
    }
}

/// One pin: a base64 SHA-256, of a certificate's SubjectPublicKeyInfo (RFC
/// 7469) or of the whole certificate, valid between optional bounds.
public struct Pin: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case spki = "spki_sha256"
        case certificate = "cert_sha256"
    }

    public var kind: Kind
    /// Canonical standard base64 with padding, without any `sha256/` prefix:
    /// the form `Certificate.spkiSHA256` produces, so matching is string equality.
    public var hash: String
    public var notBefore: Date?
    public var notAfter: Date?
    public var note: String?
    /// The `pin:` value.
    public var location: SourceLocation

    public init(kind: Kind = .spki, hash: String, notBefore: Date? = nil, notAfter: Date? = nil,
                note: String? = nil, location: SourceLocation = .embeddedDefaults) {
        self.kind = kind
        self.hash = hash
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.note = note
        self.location = location
    }

    /// Both bounds are inclusive: a pin starting or ending exactly now is active.
    public func isActive(at now: Date) -> Bool {
        if let notBefore, now < notBefore { return false }
        if let notAfter, now > notAfter { return false }
        return true
    }

    /// Parses `BASE64` or `sha256/BASE64`; nil unless it is 32 bytes.
    public static func canonicalHash(_ text: String) -> String? {
        var t = Substring(text)
        if t.lowercased().hasPrefix("sha256/") { t = t.dropFirst("sha256/".count) }
        var padded = String(t)
        guard !padded.isEmpty, padded.count <= 44 else { return nil }
        while padded.count % 4 != 0 { padded += "=" }
        guard let bytes = Base64.decode(padded), bytes.count == 32 else { return nil }
        return Base64.encode(bytes)
    }
}

/// A time range, inclusive at both ends (`transition: {from, until}`).
public struct TimeWindow: Sendable, Hashable {
    public var from: Date
    public var until: Date
    public var location: SourceLocation

    public init(from: Date, until: Date, location: SourceLocation = .embeddedDefaults) {
        self.from = from
        self.until = until
        self.location = location
    }

    public func contains(_ now: Date) -> Bool { from <= now && now <= until }
}
