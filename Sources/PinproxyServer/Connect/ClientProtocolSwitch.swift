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
        // SETTINGS_MAX_HEADER_LIST_SIZE also bounds a header block as it arrives:
        // a HEADERS frame and its CONTINUATIONs past it are a connection error.
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: Self.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: limits.maxHeaderBytes),
        ]
        // Streams are initialised on this connection's event loop.
        let makeExchangeHandler = NIOLoopBound(self.makeExchangeHandler, eventLoop: context.eventLoop)
        let idleTimeout = TimeAmount(limits.idleTimeout)
        let http2 = NIOHTTP2Handler(
            mode: .server, eventLoop: context.eventLoop, connectionConfiguration: connection, streamConfiguration: .init(),
            streamDelegate: StreamEventsInOrder(manager: manager.http2StreamDelegate, eventLoop: context.eventLoop)
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                // Flow control follows the upstream: a stream's DATA is read (and
                // its window reopened) only when its exchange asks, as on HTTP/1.
                try stream.syncOptions?.setOption(.autoRead, value: false)
                try Self.configureStream(stream.pipeline.syncOperations, idleTimeout: idleTimeout,
                                         exchange: makeExchangeHandler.value())
            }
        }
        try sync.addHandler(http2, position: .after(self))
        try sync.addHandler(manager, position: .after(http2))
        // The HTTP/1 decoder leaves the pipeline a tick later: connection-level
        // frames, and errors, must end before it.
        try sync.addHandler(HTTP2ConnectionEnd(logger: logger), position: .after(manager))
        // The manager joins a channel that is already active, and NIO tells only
        // the handlers present at activation: without this its idle timer never
        // started, and a connection that opened no stream stayed for ever.
        // (`NIOHTTP2Handler` saw the channel active when added and has sent its
        // SETTINGS; the event starts after it, so it does not see it twice.)
        try sync.context(handler: http2).fireChannelActive()
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
        try sync.addHandler(RequestAuthorityFromHost())
        try sync.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
        try sync.addHandler(HTTP2RequestFramer(idleTimeout: idleTimeout))
        try sync.addHandler(exchange)
    }

    /// Streams an app may open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    static let maxConcurrentStreams = 128
}
