import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import PinproxyPolicy
import PinproxyTLS

/// The HTTP version an exchange's client speaks: a label of `requests_total`
/// and of the access line (docs/contract.md §11).
enum ClientProtocol: String, Sendable {
    case http1
    case h2
}

/// Sits right after the interception leg's `TLSHandler`. An intercepted
/// session is installed for HTTP/1.1 (the app may not offer ALPN at all);
/// when the handshake settles on `h2`, this swaps the HTTP/1 layers for
/// swift-nio-http2's server pipeline, in the same event that reports the
/// handshake, before any application byte is read. Each h2 stream then gets
/// the HTTP/1 codec view and its own `HTTPExchangeHandler`: the same
/// exchange code as an HTTP/1.1 request (docs/contract.md §11).
final class ClientProtocolSwitch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Builds one stream's exchange handler (the session's host, policy, client).
    let makeExchangeHandler: () -> HTTPExchangeHandler
    let limits: PinproxyConfig.Limits
    let logger: Logger

    init(limits: PinproxyConfig.Limits, logger: Logger, makeExchangeHandler: @escaping () -> HTTPExchangeHandler) {
        self.limits = limits
        self.logger = logger
        self.makeExchangeHandler = makeExchangeHandler
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted(let info) = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // The HTTP/1 exchange handler still sees the handshake (it counts it).
        context.fireUserInboundEventTriggered(event)
        if info.applicationProtocol == "h2" {
            do {
                try switchToHTTP2(context: context)
            } catch {
                logger.error("could not set up HTTP/2 on an intercepted session", metadata: ["error": "\(error)"])
                context.close(promise: nil)
                return
            }
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func switchToHTTP2(context: ChannelHandlerContext) throws {
        let sync = context.pipeline.syncOperations
        // Out: the HTTP/1 layers (head timer, codec, the session's exchange handler).
        _ = sync.removeHandler(try sync.handler(type: HTTPExchangeHandler.self))
        if let validator = try? sync.handler(type: NIOHTTPResponseHeadersValidator.self) { _ = sync.removeHandler(validator) }
        _ = sync.removeHandler(try sync.handler(type: HTTPResponseEncoder.self))
        _ = sync.removeHandler(try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self))
        _ = sync.removeHandler(try sync.handler(type: RequestHeadTimer.self))

        // In: HTTP/2. The connection manager closes an idle connection after
        // `idle_timeout` and turns shutdown into GOAWAY (streams in flight finish).
        // No grace timer of its own: `shutdown_grace` is the server's, which cuts
        // off what is left, counts it and says so; a second timer of the same
        // length raced it and could close the connection first, unlogged.
        let manager = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: context.eventLoop,
            configuration: .init(maxIdleTime: TimeAmount(limits.idleTimeout), maxAge: nil,
                                 maxGraceTime: nil, keepalive: nil))
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: Self.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: limits.maxHeaderBytes),
        ]
        // Streams are initialised on this connection's event loop.
        let makeExchangeHandler = NIOLoopBound(self.makeExchangeHandler, eventLoop: context.eventLoop)
        let idleTimeout = TimeAmount(limits.idleTimeout)
        let http2 = NIOHTTP2Handler(
            mode: .server, eventLoop: context.eventLoop, connectionConfiguration: connection,
            streamConfiguration: .init(), streamDelegate: manager.http2StreamDelegate
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                // Flow control follows the upstream: a stream's DATA is read (and
                // its window reopened) only when its exchange asks, as on HTTP/1.
                try stream.syncOptions?.setOption(.autoRead, value: false)
                try Self.configureStream(stream.pipeline.syncOperations, idleTimeout: idleTimeout,
                                         exchange: makeExchangeHandler.value())
            }
        }
        let events = HTTP2ClientConnectionEvents(logger: logger)
        try sync.addHandler(events, position: .after(self))
        try sync.addHandler(http2, position: .after(events))
        try sync.addHandler(manager, position: .after(http2))
        // The HTTP/1 decoder leaves the pipeline a tick later: connection-level
        // frames must end before it.
        try sync.addHandler(HTTP2ConnectionFrameSink(), position: .after(manager))
        // The connection carries every stream's frames, so it always reads;
        // each stream's window (opened as its exchange reads) is the backpressure.
        try context.channel.syncOptions?.setOption(.autoRead, value: true)
        context.read()
    }

    /// One app stream's pipeline, from its frames to its exchange (the fuzz
    /// target builds its HTTP/2 streams with this too).
    static func configureStream(_ sync: ChannelPipeline.SynchronousOperations, idleTimeout: TimeAmount,
                                exchange: HTTPExchangeHandler) throws {
        try sync.addHandler(HeadersOnlyResponseMerger())
        try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
        try sync.addHandler(HTTP2RequestFramer(idleTimeout: idleTimeout))
        try sync.addHandler(exchange)
    }

    /// Streams an app may open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    static let maxConcurrentStreams = 128
}

/// Takes the connection-level frames (SETTINGS, PING, GOAWAY) the HTTP/2
/// handlers pass on: nothing after them reads frames.
final class HTTP2ConnectionFrameSink: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// An h2 client connection's own events: a transport error ends the
/// connection (its streams' exchanges see it close). Shutdown needs nothing
/// here: the listener's `ChannelShouldQuiesceEvent` passes on to the HTTP/2
/// connection manager, which answers with a graceful GOAWAY.
final class HTTP2ClientConnectionEvents: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/2 client connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
