import NIOCore

/// What a WebSocket upgrade becomes after the upstream's `101`
/// (docs/contract.md §11): the HTTP layers their builders added come out of
/// the app's connection (`HTTP1ServerPipeline`, and the listener's CONNECT
/// handler) and of the upstream connection (`UpstreamPipeline`'s HTTP/1.1
/// codec), and the same matched pair of `GlueHandler`s that carries a
/// `tunnel` (`SplicePipeline`) splices them, withholding reads from one side
/// while the other cannot write. The upstream connection stays leased from
/// the pool (it still counts against `max_upstream_connections`) and is
/// forgotten by the pool when it closes; it is never handed back.
enum WebSocketSplicePipeline {
    /// Called on the event loop the two channels share, outside any decoder
    /// callback (the decoders are taken out here).
    /// - Parameters:
    ///   - context: the `HTTPExchangeHandler`'s context on the app's connection.
    ///   - clientLayers: the app connection's HTTP layers (the exchange handler's).
    ///   - idleTimeout: `limits.idle_timeout`; no byte either way for this long
    ///     closes both connections (`.zero`: never).
    ///   - onIdle: told before an idle splice is closed.
    ///   - onClose: the bytes each way, once, when the splice ends.
    static func install(client context: ChannelHandlerContext, clientLayers: PipelineLayers, upstream: UpstreamConnection,
                        idleTimeout: TimeAmount, onIdle: @escaping () -> Void,
                        onClose: @escaping (_ up: Int, _ down: Int) -> Void) throws {
        precondition(upstream.channel.eventLoop === context.eventLoop, "a splice's two channels must share an event loop")
        guard let upstreamHandler = upstream.http1Handler, let upstreamLayers = upstreamHandler.layers else {
            throw ChannelError.operationUnsupported  // an HTTP/2 stream: the pool never leases one for an upgrade
        }
        let client = context.pipeline.syncOperations
        let remote = upstream.channel.pipeline.syncOperations

        upstream.receiver = nil
        // Before the connection's own handler, which stays only to see the close
        // and do the pool's bookkeeping (its slot, the connections gauge).
        let (clientSide, upstreamSide) = try SplicePipeline.addGlue(
            client: client, upstream: remote, upstreamPosition: .before(upstreamHandler), idleTimeout: idleTimeout, onIdle: onIdle)
        clientSide.onClose = { onClose(clientSide.bytesRelayed, upstreamSide.bytesRelayed) }

        // The HTTP layers out: handlers first, the decoders last, so that bytes
        // a decoder held past the handshake (the upstream's first frame, or an
        // app that did not wait) go on through the glue, not lost.
        clientLayers.removeHandlers(from: client)
        upstreamLayers.removeHandlers(from: remote)
        // A decoder leaves the pipeline on a later tick, handing on its
        // leftovers then: reads start, and the leftovers are flushed, after both.
        let decoders = upstreamLayers.removeDecoders(from: remote) + clientLayers.removeDecoders(from: client)
        let clientChannel = context.channel
        let upstreamChannel = upstream.channel
        EventLoopFuture.andAllComplete(decoders, on: context.eventLoop).assumeIsolated().whenComplete { _ in
            clientChannel.flush()
            upstreamChannel.flush()
            clientChannel.setOption(.autoRead, value: true).whenFailure { _ in }
            upstreamChannel.setOption(.autoRead, value: true).whenFailure { _ in }
        }
    }
}
