import NIOCore

/// Bounds how long a client may take to send a request head (slow-loris,
/// `limits.header_timeout`) and how long a connection may sit idle between
/// requests (`limits.idle_timeout`). Sits right below the HTTP decoder and
/// only watches bytes arrive; the proxy handler says when a head is complete
/// and when the connection is idle again. The deadlines are checked by the
/// event loop's `DeadlineSweeper`.
final class RequestHeadTimer: ChannelInboundHandler, RemovableChannelHandler, DeadlineWatcher {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// Between requests: no byte of a head yet.
        case idle(NIODeadline?)
        /// Bytes of a head are arriving.
        case readingHead(NIODeadline?)
        /// A head is complete; the exchange is in progress.
        case inExchange
    }

    private var state: State = .inExchange
    private let headerTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var context: ChannelHandlerContext?
    private var sweeper: DeadlineSweeper?
    /// Why the connection was closed by a timer, for the log.
    var onTimeout: ((String) -> Void)?

    var headerTimeoutAmount: TimeAmount { headerTimeout }
    var idleTimeoutAmount: TimeAmount { idleTimeout }

    init(headerTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
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
        if case .idle = state {
            state = .readingHead(deadline(after: headerTimeout))
        }
        context.fireChannelRead(data)
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
        case .readingHead(let deadline?) where deadline <= now:
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
