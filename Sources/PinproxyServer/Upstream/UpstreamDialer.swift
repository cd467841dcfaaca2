import NIOCore

/// Dialling replaced by connections made in-process. Only the fuzz targets
/// (Fuzz/Sources, docs/fuzzing.md: an upstream answering on an
/// `EmbeddedChannel`) and the tests' in-process proxy (`InProcessProxy`:
/// names sent to loopback test servers) set one; the product always dials (nil).
struct UpstreamDialer: Sendable {
    /// In place of DNS, TCP, TLS and the pin check: a connection ready for requests.
    var connection: @Sendable (DialPlan, any EventLoop) -> EventLoopFuture<UpstreamConnection>
    /// In place of a raw TCP dial (tunnels): a channel the initializer has run on.
    var channel: @Sendable (DialPlan, any EventLoop, @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<any Channel>
}
