import Foundation

/// The last active probe of one policy, for `GET /policies` (DESIGN §5).
public struct ProbeStatus: Sendable, Hashable {
    public var success: Bool
    /// When the probe ran.
    public var at: Date
    /// The upstream leaf's notAfter, when the handshake got that far.
    public var leafNotAfter: Date?

    public init(success: Bool, at: Date, leafNotAfter: Date? = nil) {
        self.success = success
        self.at = at
        self.leafNotAfter = leafNotAfter
    }
}
