import NIOCore
import NIOHTTP1

/// Bounds how long a client may take to send a request head (slow-loris,
/// `limits.header_timeout`) and how long a connection may sit idle between
/// requests (`limits.idle_timeout`). Sits right below the HTTP decoder and
/// only watches bytes arrive; the proxy handler says when a head is complete
/// and when the connection is idle again. The deadlines are checked by the
/// event loop's `DeadlineSweeper`.
///
/// It also counts the bytes of a head as they arrive: the decoder's own
/// limit counts only header names and values, so a head of many tiny fields
/// or of a long request line could be several times `max_header_bytes`.
/// A head still incomplete past the limit is refused (431) here.
final class RequestHeadTimer: ChannelInboundHandler, RemovableChannelHandler, DeadlineWatcher {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// Between requests: no byte of a head yet.
        case idle(NIODeadline?)
        /// Bytes of a head are arriving (how many so far).
        case readingHead(NIODeadline?, bytes: Int)
        /// A head is complete; the exchange is in progress.
        case inExchange
    }

    private var state: State = .inExchange
    private let headerTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    /// `limits.max_header_bytes`, counted over the whole head.
    private let maxHeadBytes: Int
    private var context: ChannelHandlerContext?
    private var sweeper: DeadlineSweeper?
    /// Why the connection was closed by a timer, for the log.
    var onTimeout: ((String) -> Void)?

    init(headerTimeout: TimeAmount, idleTimeout: TimeAmount, maxHeadBytes: Int) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        self.maxHeadBytes = maxHeadBytes
    }

    /// A timer for an inner layer (an intercepted session) with the same limits.
    func makeSibling() -> RequestHeadTimer {
        RequestHeadTimer(headerTimeout: headerTimeout, idleTimeout: idleTimeout, maxHeadBytes: maxHeadBytes)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        sweeper = DeadlineSweeper.current(on: context.eventLoop)
        sweeper?.watch(self)
        if context.channel.isActive { connectionIsIdle() }
    }

    func channelActive(context: ChannelHandlerContext) {
        connectionIsIdle()
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sweeper?.unwatch(self)
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        sweeper?.unwatch(self)
        state = .inExchange
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let count = unwrapInboundIn(data).readableBytes
        switch state {
        case .idle:
            state = .readingHead(deadline(after: headerTimeout), bytes: count)
        case .readingHead(let deadline, let bytes):
            state = .readingHead(deadline, bytes: bytes + count)
        case .inExchange:
            break
        }
        context.fireChannelRead(data)
        // The decoder has seen these bytes; a head that is still not complete
        // after more than the limit is refused as oversize.
        if case .readingHead(_, let bytes) = state, bytes > maxHeadBytes {
            state = .inExchange  // once
            context.fireErrorCaught(HTTPParserError.headerOverflow)
        }
    }

    /// The proxy handler decoded a whole head.
    func headComplete() {
        state = .inExchange
    }

    /// The exchange is over; the next byte starts a new head.
    func connectionIsIdle() {
        state = .idle(deadline(after: idleTimeout))
    }

    func checkDeadlines(now: NIODeadline) {
        let reason: String
        switch state {
        case .idle(let deadline?) where deadline <= now:
            reason = "idle longer than idle_timeout"
        case .readingHead(let deadline?, _) where deadline <= now:
            reason = "no complete request head within header_timeout"
        case .idle, .readingHead, .inExchange:
            return
        }
        state = .inExchange  // once
        onTimeout?(reason)
        context?.channel.close(promise: nil)
    }

    private func deadline(after timeout: TimeAmount) -> NIODeadline? {
        timeout.nanoseconds > 0 ? .now() + timeout : nil
    }
}
