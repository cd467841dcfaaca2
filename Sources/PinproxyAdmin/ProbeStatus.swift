import Foundation

/// The last active probe of one policy, for `GET /policies` (docs/contract.md §5).
public struct ProbeStatus: Sendable, Hashable {
    /// The handshake passed the policy: a request would have been served.
    public var success: Bool
    /// When the probe ran.
    public var at: Date
    /// The upstream leaf's notAfter, when the handshake got that far.
    public var leafNotAfter: Date?
    /// How the pins judged the chain (`match`, `mismatch_reported`,
    /// `mismatch_enforced`, `no_active_pins`, `unpinned`); nil when the
    /// handshake failed before the pins were looked at.
    public var verdict: String?
    /// The refusal code when it failed (`pin_mismatch`, `verify_failed`…).
    public var error: String?
    /// What went wrong, or which pins were observed on a reported mismatch.
    public var detail: String?

    public init(success: Bool, at: Date, leafNotAfter: Date? = nil, verdict: String? = nil,
                error: String? = nil, detail: String? = nil) {
        self.success = success
        self.at = at
        self.leafNotAfter = leafNotAfter
        self.verdict = verdict
        self.error = error
        self.detail = detail
    }
}
