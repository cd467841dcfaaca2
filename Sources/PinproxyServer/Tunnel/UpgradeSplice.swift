import NIOCore
import NIOHTTP1

/// What a WebSocket upgrade becomes after the upstream's `101`
/// (docs/contract.md §11): the HTTP layers come out of the app's connection
/// and of the upstream connection, and the same matched pair of
/// `GlueHandler`s that carries a `tunnel` splices them, withholding reads
/// from one side while the other cannot write. The upstream connection stays
/// leased from the pool (it still counts against `max_upstream_connections`)
/// and is forgotten by the pool when it closes; it is never handed back.
enum UpgradeSplice {
    /// Called on the event loop the two channels share, outside any decoder
    /// callback (the decoders are taken out here).
    /// - Parameters:
    ///   - context: the `HTTPExchangeHandler`'s context on the app's connection.
    ///   - idleTimeout: `limits.idle_timeout`; no byte either way for this long
    ///     closes both connections (`.zero`: never).
    ///   - onIdle: told before an idle splice is closed.
    ///   - onClose: the bytes each way, once, when the splice ends.
    static func install(client context: ChannelHandlerContext, upstream: UpstreamConnection, idleTimeout: TimeAmount,
                        onIdle: @escaping () -> Void, onClose: @escaping (_ up: Int, _ down: Int) -> Void) throws {
        precondition(upstream.channel.eventLoop === context.eventLoop, "a splice's two channels must share an event loop")
        let client = context.pipeline.syncOperations
        let remote = upstream.channel.pipeline.syncOperations
        let (clientSide, upstreamSide) = GlueHandler.matchedPair()

        upstream.receiver = nil
        clientSide.onClose = { onClose(clientSide.bytesRelayed, upstreamSide.bytesRelayed) }

        // The idle timer sees both directions on the app's side: what the app
        // sends is read there, what the upstream sends is written there.
        if idleTimeout > .zero {
            try client.addHandler(IdleStateHandler(allTimeout: idleTimeout), position: .last)
            try client.addHandler(SpliceIdleClose(onIdle: onIdle), position: .last)
        }
        try client.addHandler(clientSide, position: .last)
        // Before the connection's own handler, which stays only to see the close
        // and do the pool's bookkeeping (its slot, the connections gauge).
        try remote.addHandler(upstreamSide, position: .before(try remote.handler(type: UpstreamHTTPHandler.self)))

        // The HTTP layers out: handlers first, the decoders last, so that bytes
        // a decoder held past the handshake (the upstream's first frame, or an
        // app that did not wait) go on through the glue, not lost.
        _ = client.removeHandler(context: context)
        try removeIfPresent(ConnectHandler.self, client)
        try removeIfPresent(HTTPServerUpgradeHandler.self, client)
        try removeIfPresent(NIOHTTPResponseHeadersValidator.self, client)
        try removeIfPresent(HTTPResponseEncoder.self, client)
        try removeIfPresent(RequestHeadTimer.self, client)
        try removeIfPresent(NIOHTTPRequestHeadersValidator.self, remote)
        try removeIfPresent(HTTPRequestEncoder.self, remote)
        // A decoder leaves the pipeline on a later tick, handing on its
        // leftovers then: reads start, and the leftovers are flushed, after both.
        let decoders = [
            try removeIfPresent(ByteToMessageHandler<HTTPResponseDecoder>.self, remote),
            try removeIfPresent(ByteToMessageHandler<HTTPRequestDecoder>.self, client),
        ].compactMap { $0 }
        let clientChannel = context.channel
        let upstreamChannel = upstream.channel
        EventLoopFuture.andAllComplete(decoders, on: context.eventLoop).assumeIsolated().whenComplete { _ in
            clientChannel.flush()
            upstreamChannel.flush()
            clientChannel.setOption(.autoRead, value: true).whenFailure { _ in }
            upstreamChannel.setOption(.autoRead, value: true).whenFailure { _ in }
        }
    }

    @discardableResult
    private static func removeIfPresent<H: RemovableChannelHandler>(_ type: H.Type, _ pipeline: ChannelPipeline.SynchronousOperations) throws
        -> EventLoopFuture<Void>? {
        guard let handler = try? pipeline.handler(type: type) else { return nil }
        return pipeline.removeHandler(handler)
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
