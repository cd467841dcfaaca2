import NIOCore

/// Bounds on the admin listener, so idle or slow clients cannot hold its
/// sockets (and the process's file descriptors) for ever.
public struct AdminLimits: Sendable, Hashable {
    /// A connection with no complete request part for this long is closed:
    /// an idle keep-alive connection, and also a head trickled byte by byte
    /// (Hummingbird counts only whole parts as activity, so this is the
    /// header timeout too). A request being answered is never cut.
    public var idleTimeout: TimeAmount
    /// Connections open at once. At the cap the listener stops accepting
    /// until one closes; further clients wait in the kernel's backlog and
    /// hold no descriptor of pinproxy's.
    public var maxConnections: Int

    public init(idleTimeout: TimeAmount = .seconds(10), maxConnections: Int = 256) {
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
    }
}
