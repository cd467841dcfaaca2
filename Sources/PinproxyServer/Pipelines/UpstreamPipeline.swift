import NIOCore
import NIOHTTP1
import NIOTLS
import PinproxyHTTP1NIO
import PinproxyTLS

/// An upstream connection for the pool. With TLS: the `TLSHandler` (the
/// policy's pins, its ALPN offer), an `UpstreamHandshakeWatcher` (readiness
/// and the handshake's failure), and NIO's ALPN handler, which puts in the
/// layers for what the server selected, once: HTTP/1.1 (the head path's
/// `RequestWriter` and `HeadPathDecoder`, and an `UpstreamHTTPHandler`) or HTTP/2 (`UpstreamHTTP2Pipeline`;
/// docs/contract.md §11, `upstream_protocol`). Without TLS: HTTP/1.1 at once.
/// Confined to the channel's event loop; the connector reads the shape once
/// `ready` has succeeded.
final class UpstreamPipeline: @unchecked Sendable {
    /// Succeeds with the handshake (nil without TLS) once the connection is
    /// ready for requests, after the pin check; fails with why it is not.
    let ready: EventLoopPromise<TLSHandshakeInfo?>
    /// The HTTP/1.1 shape's handler, once built.
    private(set) var http1: UpstreamHTTPHandler?
    /// The HTTP/2 shape's streams, once built.
    private(set) var multiplexer: UpstreamMultiplexer?

    private init(ready: EventLoopPromise<TLSHandshakeInfo?>) {
        self.ready = ready
    }

    /// Adds the shape to `channel`'s (empty) pipeline. `tls` nil: plain HTTP.
    static func configure(_ channel: any Channel, tls: TLSHandler?) throws -> UpstreamPipeline {
        let pipeline = UpstreamPipeline(ready: channel.eventLoop.makePromise())
        do {
            try pipeline.addLayers(channel, tls: tls)
        } catch {
            pipeline.ready.fail(error)  // no handler holds it, so nothing else would complete it
            throw error
        }
        return pipeline
    }

    private func addLayers(_ channel: any Channel, tls: TLSHandler?) throws {
        let pipeline = self
        let sync = channel.pipeline.syncOperations
        guard let tls else {
            pipeline.http1 = try Self.addHTTP1(sync, ready: pipeline.ready, usesTLS: false)
            return
        }
        try sync.addHandler(tls)
        try sync.addHandler(UpstreamHandshakeWatcher(ready: pipeline.ready))
        try sync.addHandler(NIOTypedApplicationProtocolNegotiationHandler<Void> { result, channel in
            // Inside the handshake's event, before pinproxy's own (which makes
            // the connection ready) and before the server's first byte.
            channel.eventLoop.makeCompletedFuture {
                if case .negotiated("h2") = result {
                    pipeline.multiplexer = try UpstreamHTTP2Pipeline.configure(channel, ready: pipeline.ready)
                } else {
                    pipeline.http1 = try UpstreamPipeline.addHTTP1(channel.pipeline.syncOperations, ready: pipeline.ready, usesTLS: true)
                }
            }
        })
    }

    /// The HTTP/1.1 layers and the connection's `UpstreamHTTPHandler`,
    /// whose `layers` a WebSocket splice takes out (the codec only).
    static func addHTTP1(_ sync: ChannelPipeline.SynchronousOperations, ready: EventLoopPromise<TLSHandshakeInfo?>,
                         usesTLS: Bool) throws -> UpstreamHTTPHandler {
        // The head path's `RequestWriter` in place of NIO's request encoder
        // and outbound validator: the same bytes and refusals for NIO's parts
        // (`HeadWriterDifferential`), and an app's head forwarded as its own
        // bytes, edited (`ForwardedRequestHead`), which NIO's encoder cannot
        // take. Framing is pinproxy's decision (`RequestFraming`), never the
        // writer's guess from the method: it writes the framing fields the
        // head has, as NIO's encoder does with automatic framing off.
        let writer = RequestWriter()
        // The head path reads the upstream's answers (PinproxyHTTP1), refusing
        // all NIO's decoder refuses and some more (docs/contract.md §10), and
        // hands each head on as its bytes, which go to the app edited, not
        // remade (`ClientResponseHead.forwarded`). NIO's default limits, as
        // before. Bytes after a WebSocket `101` belong to the splice that
        // replaces the decoder (handed on when it goes). It is told of each
        // request by the connection that writes it (`SentRequests`).
        let sent = SentRequests()
        let decoder = ByteToMessageHandler(UpstreamResponseHeadPathDecoder(decoder: HeadPathDecoder(
            maxFieldBytes: Self.responseHeadBytes, maxFieldCount: Self.responseFieldCount), sent: sent))
        let handler = UpstreamHTTPHandler(ready: ready, usesTLS: usesTLS, sent: sent, writer: writer)
        try sync.addHandlers([writer, decoder, handler])
        handler.layers = PipelineLayers(handlers: [writer], decoders: [decoder])
        return handler
    }

    /// A response head's limits: NIO's decoder's defaults (80 KiB of names
    /// and values, 65,534 fields), which applied until the head path read it.
    static let responseHeadBytes = 80 * 1024
    static let responseFieldCount = 65_534
}

/// Right after an upstream connection's `TLSHandler`: completes `ready` with
/// the handshake (pinproxy's event comes once the pin check has passed), or
/// fails it with the handshake's error (a pin mismatch among them) or the
/// connection's end, whichever comes first. Before ALPN has chosen the HTTP
/// layers it is the only handler to see either; a good handshake is its last
/// event, and it leaves the pipeline with it.
final class UpstreamHandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    let ready: EventLoopPromise<TLSHandshakeInfo?>
    private var handshakeDone = false

    init(ready: EventLoopPromise<TLSHandshakeInfo?>) {
        self.ready = ready
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted(let info) = event as? PinproxyTLS.TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        handshakeDone = true
        ready.succeed(info)
        // Readiness was its one job: it leaves, rather than pass every later
        // read on (`TLSHandler` fired ALPN's event, which put the HTTP layers
        // in, before this one).
        context.fireUserInboundEventTriggered(event)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ready.fail(error)
        if !handshakeDone {
            context.close(promise: nil)  // no HTTP layer yet to end the connection
            return
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A dial that failed tears the pipeline down before any other event.
        ready.fail(ChannelError.ioOnClosedChannel)
    }
}
