import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyHTTP1NIO
import PinproxyPolicy
import PinproxyTLS

/// Who receives an upstream connection's response: the client-side handler of
/// the request in flight. Called on the connection's (= the client's) event loop.
protocol UpstreamResponseReceiver: AnyObject {
    func upstreamReceived(_ part: UpstreamResponsePart)
    func upstreamReadComplete()
    func upstreamWritabilityChanged()
    /// The connection failed or closed while this receiver held it.
    func upstreamClosed(_ error: (any Error)?)
}

/// One upstream connection (TCP, TLS per the host's policy, HTTP/1.1), owned
/// by the pool and lent to one request at a time. Confined to its event loop,
/// which is also the event loop of every client connection it serves, with
/// one exception: at `max_upstream_connections`, a stream of an HTTP/2
/// connection may serve a request on another loop (`receiver` then hops).
///
/// HTTP/2 (docs/contract.md §11): the pool holds the connection (`multiplexer`
/// set, no HTTP handler of its own), and an exchange holds one of its streams:
/// an `UpstreamConnection` too, whose channel is the stream's, with the
/// HTTP/1 codec view on it and `parent` the connection. The exchange code
/// cannot tell the two apart.
final class UpstreamConnection: @unchecked Sendable {
    let channel: any Channel
    let key: UpstreamPool.Key
    /// The pin verdict of this connection's handshake (nil without TLS).
    /// A stream's are its connection's, read from `parent` when asked:
    /// copied into each stream they cost a dozen retains a stream for what
    /// is read at most once (issue 33).
    var pinEvaluation: PinEvaluation? { parent?.connectionPinEvaluation ?? connectionPinEvaluation }
    var handshake: TLSHandshakeInfo? { parent?.connectionHandshake ?? connectionHandshake }
    /// The evaluation's verdict alone, without a copy of the chain it saw.
    var pinVerdict: PinVerdict? { parent?.connectionPinEvaluation?.verdict ?? connectionPinEvaluation?.verdict }
    /// The verdict's label (the access line's `pin`), read where the
    /// evaluation is held: no copy of the verdict, whose pin holds the
    /// policy's strings.
    var pinLabel: String? {
        parent?.connectionPinEvaluation?.verdict.metricLabel ?? connectionPinEvaluation?.verdict.metricLabel
    }
    private let connectionPinEvaluation: PinEvaluation?
    private let connectionHandshake: TLSHandshakeInfo?
    /// The address actually dialled.
    let remoteAddress: String
    /// The HTTP/1 view: the connection's (HTTP/1.1) or the stream's. Nil on an HTTP/2 connection.
    fileprivate let handler: UpstreamHTTPHandler?
    /// The connection's HTTP/1.1 handler, for a WebSocket splice (nil on HTTP/2).
    var http1Handler: UpstreamHTTPHandler? { parent == nil ? handler : nil }
    private let closeReporter: any UpstreamCloseReporter
    /// An HTTP/2 connection: opens streams.
    let multiplexer: UpstreamMultiplexer?
    /// A stream: the HTTP/2 connection it belongs to.
    let parent: UpstreamConnection?
    /// A stream: its only handler, handed the request's parts directly on
    /// the stream's loop (`write`).
    private let streamAdapter: UpstreamHTTP2StreamAdapter?

    /// False once a response said `Connection: close` or a message was cut short.
    var reusable = true
    /// An HTTP/1.1 connection (not a stream, nor an HTTP/2 connection): kept
    /// by the exchange handler that used it last (`UpstreamParking`).
    let parking: UpstreamParking?
    /// An HTTP/2 connection: the room of streams that ended, kept by the
    /// session that used it (`UpstreamStreamRoom`).
    let streamRoom: UpstreamStreamRoom?

    /// An HTTP/1.1 connection.
    init(channel: any Channel, key: UpstreamPool.Key, handler: UpstreamHTTPHandler, pinEvaluation: PinEvaluation?, handshake: TLSHandshakeInfo?) {
        self.channel = channel
        self.key = key
        self.handler = handler
        self.closeReporter = handler
        self.multiplexer = nil
        self.parent = nil
        self.streamAdapter = nil
        self.parking = UpstreamParking()
        self.streamRoom = nil
        self.connectionPinEvaluation = pinEvaluation
        self.connectionHandshake = handshake
        self.remoteAddress = channel.remoteAddress?.hostPort ?? "?"
    }

    /// A stream of the HTTP/2 connection `parent`, whose pipeline is `adapter`.
    init(stream: any Channel, adapter: UpstreamHTTP2StreamAdapter, parent: UpstreamConnection) {
        self.channel = stream
        self.key = parent.key
        self.handler = adapter.handler
        self.closeReporter = adapter.handler
        self.multiplexer = nil
        self.parent = parent
        self.streamAdapter = adapter
        self.parking = nil
        self.streamRoom = nil
        self.connectionPinEvaluation = nil
        self.connectionHandshake = nil
        self.remoteAddress = parent.remoteAddress
    }

    /// An HTTP/2 connection.
    init(channel: any Channel, key: UpstreamPool.Key, multiplexer: UpstreamMultiplexer, pinEvaluation: PinEvaluation?, handshake: TLSHandshakeInfo?) {
        self.channel = channel
        self.key = key
        self.handler = nil
        self.closeReporter = multiplexer.handler
        self.multiplexer = multiplexer
        self.parent = nil
        self.streamAdapter = nil
        self.parking = nil
        self.streamRoom = UpstreamStreamRoom()
        self.connectionPinEvaluation = pinEvaluation
        self.connectionHandshake = handshake
        self.remoteAddress = channel.remoteAddress?.hostPort ?? "?"
    }

    /// Set and cleared by the exchange that holds the connection, on the
    /// exchange's loop. On the connection's own loop it is the handler's
    /// receiver. From another loop (a stream lent across loops) the handler
    /// gets a `ReceiverHop` that hands every callback to the exchange's loop,
    /// and that is cut off the moment the exchange lets go: a part already on
    /// its way then goes nowhere rather than to that exchange's next request.
    /// Writes, flushes and reads need no hop (NIO's channel operations are
    /// thread-safe, and keep their order); `release` hops in the pool.
    var receiver: (any UpstreamResponseReceiver)? {
        get { handler?.receiver }
        set {
            if channel.eventLoop.inEventLoop {
                handler?.receiver = newValue
                return
            }
            precondition(parent != nil, "only an HTTP/2 stream serves a request on another event loop")
            hop?.cutOff()
            hop = newValue.map { ReceiverHop($0) }
            let hop = self.hop
            channel.eventLoop.execute { self.handler?.receiver = hop }
        }
    }

    /// The hop of a stream lent across loops (touched only on the exchange's loop).
    private var hop: ReceiverHop?

    /// Told once when the channel closes; told at once if it already has.
    var onClose: (() -> Void)? {
        get { closeReporter.onClose }
        set {
            channel.eventLoop.preconditionInEventLoop()
            if channel.isActive {
                closeReporter.onClose = newValue
            } else {
                newValue?()
            }
        }
    }

    var isActive: Bool { channel.isActive }
    var isWritable: Bool { channel.isWritable }

    /// An exchange's head: one forwarded as the app's bytes goes to an
    /// HTTP/1.1 connection's writer as those bytes, edited; one forwarded as
    /// an app's HTTP/2 block goes to an HTTP/2 stream as that block, edited;
    /// any other is sent whole. (An HTTP/1.1 connection serves exchanges of
    /// its own event loop only, so the writer is called on it.)
    /// `head` is `inout` only to be read where the route holds it: passed
    /// by value, a class's stored property is copied first (its field
    /// lists retained and released, once a request). Nothing changes it.
    func writeHead(_ head: inout UpstreamRequestHead) {
        // The head's parts are read where `head` holds them (`head.block!`,
        // `head.forwarded!`): bound to names, each was copied, its field
        // lists retained, once a request.
        if head.block != nil, let streamAdapter, channel.eventLoop.inEventLoop, streamAdapter.sendForwarded(head.block!) {
            handler?.sent?.sent(head.block!.app.method)
            return
        }
        guard head.forwarded != nil, let writer = handler?.writer else {
            return write(.head(head.whole))
        }
        channel.eventLoop.assertInEventLoop()
        handler?.sent?.sent(head.forwarded!.app.method)
        head.forwarded!.write(to: writer, promise: nil)
    }

    func write(_ part: HTTPClientRequestPart, promise: EventLoopPromise<Void>? = nil) {
        switch part {
        case .head(let head): handler?.sent?.sent(head.method)  // an HTTP/1.1 connection's decoder learns of it
        case .body: break
        case .end: sentEnd = true
        }
        // On a stream's own loop the part goes to its adapter without a trip
        // through the pipeline (an exchange on another loop writes through it).
        if let streamAdapter, channel.eventLoop.inEventLoop, streamAdapter.send(part, promise: promise) { return }
        channel.write(part, promise: promise)
    }

    /// A stream whose request and response both ended is closed by HTTP/2
    /// itself; any other is reset when its exchange lets go.
    private(set) var sentEnd = false
    var isComplete: Bool { sentEnd && (handler?.receivedEnd ?? false) }

    func flush() { channel.flush() }

    /// Asks for more of the response (the upstream channel does not auto-read).
    func read() { channel.read() }

    func close() { channel.close(promise: nil) }
}

/// Whoever tells the pool a connection went away.
protocol UpstreamCloseReporter: AnyObject {
    var onClose: (() -> Void)? { get set }
}

/// The top of an upstream pipeline: hands response parts to the current
/// receiver and tells the pool when an idle connection dies. Confined to its
/// channel's event loop (the connector touches it only from there).
final class UpstreamHTTPHandler: ChannelInboundHandler, RemovableChannelHandler, UpstreamCloseReporter, @unchecked Sendable {
    typealias InboundIn = UpstreamResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    weak var receiver: (any UpstreamResponseReceiver)?
    /// Completed when the connection is ready for requests (after TLS and the
    /// pin check), then dropped, so that the events after it box no error for
    /// a promise already settled. Nil from the start on an HTTP/2 stream:
    /// its connection was ready before the stream was opened.
    private var ready: EventLoopPromise<TLSHandshakeInfo?>?
    /// Whether `ready` still waits to be settled.
    var awaitsReady: Bool { ready != nil }
    private let usesTLS: Bool
    /// Called once when the channel goes away (the pool forgets the connection).
    var onClose: (() -> Void)?
    /// The HTTP/1.1 codec `UpstreamPipeline` added with it (nil on a stream).
    var layers: PipelineLayers?
    /// The requests written, for the response decoder (nil on a stream:
    /// HTTP/2 pairs answers with requests itself).
    let sent: SentRequests?
    /// The connection's HTTP/1.1 writer, which takes a head forwarded as
    /// the app's bytes (nil on a stream).
    let writer: RequestWriter?

    init(ready: EventLoopPromise<TLSHandshakeInfo?>?, usesTLS: Bool, sent: SentRequests? = nil, writer: RequestWriter? = nil) {
        self.ready = ready
        self.usesTLS = usesTLS
        self.sent = sent
        self.writer = writer
    }

    /// Settles `ready` if it still waits (the error is made only then).
    private func settleReady(_ result: @autoclosure () -> Result<TLSHandshakeInfo?, any Error>) {
        guard let ready else { return }
        self.ready = nil
        ready.completeWith(result())
    }

    func channelActive(context: ChannelHandlerContext) {
        if !usesTLS { settleReady(.success(nil)) }
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if !usesTLS && context.channel.isActive { settleReady(.success(nil)) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A dial that failed tears the pipeline down before any other event.
        settleReady(.failure(ChannelError.ioOnClosedChannel))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let info) = event as? TLSUserEvent {
            settleReady(.success(info))
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The response's end arrived (a stream is then over once the request's end is sent).
    private(set) var receivedEnd = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Unwrapped once: a part that is not a `ByteBuffer` leaves `NIOAny`
        // through a dynamic cast each time (issue 33: two casts a part).
        received(unwrapInboundIn(data), context: context)
    }

    /// A response part: from the pipeline on an HTTP/1.1 connection, and
    /// straight from the adapter on an HTTP/2 stream (`UpstreamHTTP2StreamAdapter`).
    func received(_ part: UpstreamResponsePart, context: ChannelHandlerContext) {
        if case .end = part { receivedEnd = true }
        guard let receiver else {
            // A response nobody asked for (an idle pooled connection, or after
            // the exchange let go): taking it as the next request's answer would
            // hand one app another's response, so the connection ends here.
            context.close(promise: nil)
            return
        }
        receiver.upstreamReceived(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let receiver {
            receiver.upstreamReadComplete()  // it asks for more when its client can take it
        } else {
            // The response is over and the connection idles in the pool: keep
            // reading, so a server's close is seen at once, and the next request's
            // read() finds the socket still in epoll's read set.
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        receiver?.upstreamWritabilityChanged()
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        settleReady(.failure(error))
        if let receiver {
            self.receiver = nil
            receiver.upstreamClosed(error)
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settleReady(.failure(ChannelError.ioOnClosedChannel))
        if let receiver {
            self.receiver = nil
            receiver.upstreamClosed(nil)
        }
        onClose?()
        onClose = nil
        context.fireChannelInactive()
    }
}

/// Hands an upstream stream's callbacks (on the stream's loop) to a receiver
/// on another loop, in order, until `cutOff` (on the receiver's loop).
final class ReceiverHop: UpstreamResponseReceiver, @unchecked Sendable {
    private weak var target: (any UpstreamResponseReceiver)?
    private let loop: any EventLoop
    private var cut = false

    /// Made on the receiver's own event loop.
    init(_ target: any UpstreamResponseReceiver) {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else {
            preconditionFailure("a receiver hop is made on an event loop")
        }
        self.target = target
        self.loop = loop
    }

    func cutOff() {
        loop.preconditionInEventLoop()
        cut = true
    }

    private func deliver(_ call: @escaping (any UpstreamResponseReceiver) -> Void) {
        let send = UnsafeTransfer(call)
        loop.execute {
            guard !self.cut, let target = self.target else { return }
            send.wrappedValue(target)
        }
    }

    func upstreamReceived(_ part: UpstreamResponsePart) { deliver { $0.upstreamReceived(part) } }
    func upstreamReadComplete() { deliver { $0.upstreamReadComplete() } }
    func upstreamWritabilityChanged() { deliver { $0.upstreamWritabilityChanged() } }
    func upstreamClosed(_ error: (any Error)?) { deliver { $0.upstreamClosed(error) } }
}

/// A value carried to another thread whose safety the caller vouches for
/// (here: the hop's closure runs on the receiver's loop only).
struct UnsafeTransfer<Value>: @unchecked Sendable {
    var wrappedValue: Value
    init(_ value: Value) { wrappedValue = value }
}
