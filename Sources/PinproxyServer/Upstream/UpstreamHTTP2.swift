import NIOCore
import NIOHTTP1
import NIOHTTP2
import PinproxyTLS

/// Sits right after an upstream connection's `TLSHandler`. The connection is
/// dialled with HTTP/1.1 layers; when the server selects `h2` in ALPN
/// (docs/contract.md §11, `upstream_protocol`), this swaps them for
/// swift-nio-http2's client pipeline in the event that reports the
/// handshake, before the server's first frame is read, and leaves the
/// connection's `UpstreamMultiplexer` in `slot` for the connector.
final class UpstreamProtocolSwitch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Filled on the channel's event loop before `ready` succeeds; read after.
    final class Slot: @unchecked Sendable {
        var multiplexer: UpstreamMultiplexer?
    }

    let slot: Slot

    init(slot: Slot) {
        self.slot = slot
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted(let info) = event as? TLSUserEvent, info.applicationProtocol == "h2" else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        do {
            try switchToHTTP2(context: context, info: info)
        } catch {
            context.fireErrorCaught(error)
        }
    }

    private func switchToHTTP2(context: ChannelHandlerContext, info: TLSHandshakeInfo) throws {
        let sync = context.pipeline.syncOperations
        let http1 = try sync.handler(type: UpstreamHTTPHandler.self)
        let connectionHandler = UpstreamHTTP2ConnectionHandler(ready: http1.ready)
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoderLimit.maxHeaderListSize),
        ]
        let http2 = NIOHTTP2Handler(
            mode: .client, eventLoop: context.eventLoop, connectionConfiguration: configuration, streamConfiguration: .init()
        ) { channel in
            // Push is disabled in SETTINGS: a server that opens a stream anyway gets it closed.
            channel.close(promise: nil)
            return channel.eventLoop.makeSucceededVoidFuture()
        }
        try sync.addHandler(http2, position: .after(self))
        try sync.addHandler(connectionHandler, position: .after(http2))
        try context.channel.syncOptions?.setOption(.autoRead, value: true)
        slot.multiplexer = UpstreamMultiplexer(streams: try http2.syncMultiplexer(), handler: connectionHandler)
        if let validator = try? sync.handler(type: NIOHTTPRequestHeadersValidator.self) { _ = sync.removeHandler(validator) }
        _ = sync.removeHandler(try sync.handler(type: HTTPRequestEncoder.self))
        _ = sync.removeHandler(try sync.handler(type: ByteToMessageHandler<HTTPResponseDecoder>.self))
        // Ready before the HTTP/1 handler goes (its removal would fail the promise).
        connectionHandler.ready.succeed(info)
        _ = sync.removeHandler(http1)
        sync.removeHandler(context: context, promise: nil)
    }
}

/// The response header list an upstream may send (SETTINGS_MAX_HEADER_LIST_SIZE).
enum HPACKDecoderLimit {
    static let maxHeaderListSize = 256 * 1024
}

/// The top of an upstream HTTP/2 connection's pipeline: it always reads (the
/// connection carries every stream's frames; each stream's own window, opened
/// as its exchange reads, is the backpressure), reports the server's stream
/// limit and GOAWAY to the pool, and tells it when the connection is gone.
final class UpstreamHTTP2ConnectionHandler: ChannelInboundHandler, UpstreamCloseReporter, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame

    let ready: EventLoopPromise<TLSHandshakeInfo?>
    var onClose: (() -> Void)?
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS changed, or GOAWAY (0).
    var onCapacity: ((Int) -> Void)?
    /// Until the server's SETTINGS say otherwise (RFC 9113 §6.5.2 advises at least 100).
    private(set) var maxStreams = 100
    private var goingAway = false

    init(ready: EventLoopPromise<TLSHandshakeInfo?>) {
        self.ready = ready
    }

    func handlerAdded(context: ChannelHandlerContext) {
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data).payload {
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams && !goingAway {
                maxStreams = setting.value
                onCapacity?(setting.value)
            }
        case .goAway:
            // Streams the server already took finish; no new one starts here.
            goingAway = true
            maxStreams = 0
            onCapacity?(0)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ready.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(ChannelError.ioOnClosedChannel)
        onClose?()
        onClose = nil
        onCapacity = nil
        context.fireChannelInactive()
    }
}

/// Opens streams on one upstream HTTP/2 connection, each with the HTTP/1
/// codec view and an `UpstreamHTTPHandler`, so an exchange holds a stream as
/// it would hold an HTTP/1.1 connection.
final class UpstreamMultiplexer: @unchecked Sendable {
    let streams: NIOHTTP2Handler.StreamMultiplexer
    let handler: UpstreamHTTP2ConnectionHandler

    init(streams: NIOHTTP2Handler.StreamMultiplexer, handler: UpstreamHTTP2ConnectionHandler) {
        self.streams = streams
        self.handler = handler
    }

    var maxStreams: Int { handler.maxStreams }

    /// A new stream on `connection` (this multiplexer's connection), opened on its event loop.
    func openStream(on connection: UpstreamConnection) -> EventLoopFuture<UpstreamConnection> {
        let loop = connection.channel.eventLoop
        // A request on another loop (the pool lends across loops at its limit).
        guard loop.inEventLoop else { return loop.flatSubmit { self.openStream(on: connection) } }
        let made = loop.makePromise(of: UpstreamConnection.self)
        streams.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                // The exchange asks for each part of the response (`read()`), as on HTTP/1.1.
                try stream.syncOptions?.setOption(.autoRead, value: false)
                let sync = stream.pipeline.syncOperations
                let handler = UpstreamHTTPHandler(ready: stream.eventLoop.makePromise(), usesTLS: false)
                try sync.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https))
                try sync.addHandler(handler)
                made.succeed(UpstreamConnection(
                    channel: stream, key: connection.key, handler: handler, pinEvaluation: connection.pinEvaluation,
                    handshake: connection.handshake, parent: connection))
            }
        }.whenFailure { error in
            made.fail(error)
        }
        return made.futureResult
    }
}
