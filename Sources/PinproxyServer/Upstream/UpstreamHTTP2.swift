import NIOCore
import NIOHTTP1
import NIOHTTP2
import PinproxyTLS

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
    /// GOAWAY arrived: streams in flight finish, no new one starts.
    private(set) var goingAway = false

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

/// Opens streams on one upstream HTTP/2 connection, each with an
/// `UpstreamHTTP2StreamAdapter` calling an `UpstreamHTTPHandler`, so an
/// exchange holds a stream as it would hold an HTTP/1.1 connection.
final class UpstreamMultiplexer: @unchecked Sendable {
    let streams: NIOHTTP2Handler.StreamMultiplexer
    let handler: UpstreamHTTP2ConnectionHandler
    /// Counts this connection's streams in the stream gauge of the policy
    /// it was dialled for: resolved by its first stream (`UpstreamCheckout`;
    /// its streams open and end on its event loop), where each stream's
    /// opening and end looked the host's series up again.
    var streamRecorder: (any TrafficRecorder)?

    init(streams: NIOHTTP2Handler.StreamMultiplexer, handler: UpstreamHTTP2ConnectionHandler) {
        self.streams = streams
        self.handler = handler
    }

    var maxStreams: Int { handler.maxStreams }

    /// A new stream on `connection` (this multiplexer's connection), from its
    /// event loop; `opened` is told once, on that loop, with the stream or why
    /// there is none. NIO sets a stream up on the loop's next tick and
    /// completes its promise whatever happens (also when the stream could not
    /// be set up at all); the stream's `UpstreamConnection` is made from it
    /// there. One promise and one callback per stream: a chain of futures
    /// here (NIO's future, a promise of ours, a failure callback, a map and
    /// a mapped error) was about a tenth of what an HTTP/2 request allocates
    /// beyond the floor (issue 33, bench/README.md).
    func openStream(on connection: UpstreamConnection, opened: @escaping (Result<UpstreamConnection, any Error>) -> Void) {
        let loop = connection.channel.eventLoop
        loop.preconditionInEventLoop()
        let made = loop.makePromise(of: (any Channel).self)
        streams.createStreamChannel(promise: made) { stream in
            do {
                _ = try UpstreamHTTP2Pipeline.configureStream(stream)
                return stream.eventLoop.makeSucceededVoidFuture()
            } catch {
                return stream.eventLoop.makeFailedFuture(error)
            }
        }
        made.futureResult.assumeIsolated().whenComplete { result in
            opened(result.flatMap { stream in
                // Found again, not carried out of the initializer: a box to carry it is an allocation.
                Result {
                    UpstreamConnection(stream: stream, adapter: try stream.pipeline.syncOperations.handler(type: UpstreamHTTP2StreamAdapter.self),
                                       parent: connection)
                }
            })
        }
    }
}
