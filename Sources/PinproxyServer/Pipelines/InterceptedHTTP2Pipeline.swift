import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import PinproxyPolicy

/// The HTTP version an exchange's client speaks: a label of `requests_total`
/// and of the access line (docs/contract.md §11).
enum ClientProtocol: String, Sendable {
    case http1
    case h2
}

/// An intercepted session whose app chose `h2` in ALPN: swift-nio-http2's
/// server pipeline after the TLS layer, and on each stream an
/// `HTTP2StreamAdapter` (frame payloads to request parts and back, no HTTP/1
/// codec) and its own `HTTPExchangeHandler`, the same exchange code as an
/// HTTP/1.1 request (docs/contract.md §11).
enum InterceptedHTTP2Pipeline {
    /// Adds the connection's shape at the end of `channel`'s pipeline (NIO's
    /// HTTP/2 handler, the connection manager, `HTTP2ConnectionEnd`); each
    /// stream's exchange handler comes from `makeExchangeHandler`. Called on
    /// the channel's event loop, with the channel active and ALPN settled.
    static func configure(_ channel: any Channel, limits: PinproxyConfig.Limits, logger: Logger,
                          makeExchangeHandler: @escaping () -> HTTPExchangeHandler) throws {
        let sync = channel.pipeline.syncOperations
        let loop = channel.eventLoop
        // The connection manager closes an idle connection after
        // `idle_timeout` and turns shutdown into GOAWAY (streams in flight finish).
        // No grace timer of its own: `shutdown_grace` is the server's, which cuts
        // off what is left, counts it and says so; a second timer of the same
        // length raced it and could close the connection first, unlogged.
        let manager = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: loop,
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
        let makeExchangeHandler = NIOLoopBound(makeExchangeHandler, eventLoop: loop)
        let idleTimeout = TimeAmount(limits.idleTimeout)
        let http2 = NIOHTTP2Handler(
            mode: .server, eventLoop: loop, connectionConfiguration: connection, streamConfiguration: .init(),
            streamDelegate: StreamEventsInOrder(manager: manager.http2StreamDelegate, eventLoop: loop)
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                // Flow control follows the upstream: a stream's DATA is read (and
                // its window reopened) only when its exchange asks, as on HTTP/1.
                try stream.syncOptions?.setOption(.autoRead, value: false)
                try Self.configureStream(stream.pipeline.syncOperations, idleTimeout: idleTimeout,
                                         exchange: makeExchangeHandler.value())
            }
        }
        try sync.addHandler(http2)
        try sync.addHandler(manager)
        // Connection-level frames and every error on the connection end here.
        try sync.addHandler(HTTP2ConnectionEnd(logger: logger))
        // The manager joins a channel that is already active, and NIO tells only
        // the handlers present at activation: without this its idle timer never
        // started, and a connection that opened no stream stayed for ever.
        // (`NIOHTTP2Handler` saw the channel active when added and has sent its
        // SETTINGS; the event starts after it, so it does not see it twice.)
        try sync.context(handler: http2).fireChannelActive()
        // The connection carries every stream's frames, so it always reads;
        // each stream's window (opened as its exchange reads) is the backpressure.
        try channel.syncOptions?.setOption(.autoRead, value: true)
        channel.read()
    }

    /// One app stream's pipeline, from its frames to its exchange (the fuzz
    /// target builds its HTTP/2 streams with this too).
    static func configureStream(_ sync: ChannelPipeline.SynchronousOperations, idleTimeout: TimeAmount,
                                exchange: HTTPExchangeHandler) throws {
        let adapter = HTTP2StreamAdapter(idleTimeout: idleTimeout)
        try sync.addHandler(adapter)
        try sync.addHandler(exchange)
        exchange.streamAdapter = adapter
        adapter.exchange = exchange
    }

    /// Streams an app may open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    static let maxConcurrentStreams = 128
}
