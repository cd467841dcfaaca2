import NIOCore

/// A byte splice between two channels on one event loop, the shape of a
/// `tunnel` and of a WebSocket after its `101`: on the app's side an idle
/// timer (it sees both directions: what the app sends is read there, what
/// the upstream sends is written there) and one of a matched pair of
/// `GlueHandler`s, the other on the upstream's side.
enum SplicePipeline {
    /// Adds the shape; `upstreamPosition` places the upstream's glue.
    /// `idleTimeout` `.zero`: no idle timer. `onIdle` is told before an idle
    /// splice is closed.
    static func addGlue(client: ChannelPipeline.SynchronousOperations, upstream: ChannelPipeline.SynchronousOperations,
                        upstreamPosition: ChannelPipeline.SynchronousOperations.Position,
                        idleTimeout: TimeAmount, onIdle: @escaping () -> Void) throws -> (client: GlueHandler, upstream: GlueHandler) {
        let (clientSide, upstreamSide) = GlueHandler.matchedPair()
        if idleTimeout > .zero {
            try client.addHandler(IdleStateHandler(allTimeout: idleTimeout), position: .last)
            try client.addHandler(SpliceIdleClose(onIdle: onIdle), position: .last)
        }
        try client.addHandler(clientSide, position: .last)
        try upstream.addHandler(upstreamSide, position: upstreamPosition)
        return (clientSide, upstreamSide)
    }
}

/// Closes a spliced connection that moved no byte either way for
/// `limits.idle_timeout` (the `IdleStateHandler` before it says when); the
/// glue closes the other side.
final class SpliceIdleClose: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let onIdle: () -> Void

    init(onIdle: @escaping () -> Void) {
        self.onIdle = onIdle
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .all {
            onIdle()
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
