import Foundation

/// An upstream's 429 window for one credential at one host
/// (docs/contract.md §4 `upstream_throttled`): requests carrying that
/// credential to that host are held back until `until`. A plain value so
/// that the proxy, which opens windows, and the session store, which shares
/// them across replicas (§12), need not know each other.
public struct ThrottleWindow: Sendable, Hashable {
    public var credential: String
    /// Lowercased.
    public var host: String
    /// An absolute time: replicas' clocks are taken to agree, as for token expiry in the store.
    public var until: Date

    public init(credential: String, host: String, until: Date) {
        self.credential = credential
        self.host = host.lowercased()
        self.until = until
    }
}
