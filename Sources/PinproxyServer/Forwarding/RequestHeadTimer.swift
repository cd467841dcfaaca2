import NIOCore

/// Bounds how long a client may take to send a request head (slow-loris,
/// `limits.header_timeout`) and how long a connection may sit idle between
/// requests (`limits.idle_timeout`). Sits right below the HTTP decoder and
/// only watches bytes arrive; the proxy handler says when a head is complete
/// and when the connection is idle again.
final class RequestHeadTimer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        /// Between requests: no byte of a head yet.
        case idle(Scheduled<Void>?)
        /// Bytes of a head are arriving.
        case readingHead(Scheduled<Void>?)
        /// A head is complete; the exchange is in progress.
        case inExchange
    }

    private var state: State = .idle(nil)
    private let headerTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var context: ChannelHandlerContext?
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
        if context.channel.isActive { connectionIsIdle() }
    }

    func channelActive(context: ChannelHandlerContext) {
        connectionIsIdle()
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .idle(let timer) = state {
            timer?.cancel()
            state = .readingHead(schedule(headerTimeout, reason: "no complete request head within header_timeout"))
        }
        context.fireChannelRead(data)
    }

    /// The proxy handler decoded a whole head.
    func headComplete() {
        cancelTimer()
        state = .inExchange
    }

    /// The exchange is over; the next byte starts a new head.
    func connectionIsIdle() {
        cancelTimer()
        state = .idle(schedule(idleTimeout, reason: "idle longer than idle_timeout"))
    }

    private func cancelTimer() {
        switch state {
        case .idle(let timer), .readingHead(let timer): timer?.cancel()
        case .inExchange: break
        }
    }

    private func schedule(_ timeout: TimeAmount, reason: String) -> Scheduled<Void>? {
        guard let context, timeout.nanoseconds > 0 else { return nil }
        let channel = context.channel
        return context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            self?.onTimeout?(reason)
            channel.close(promise: nil)
        }
    }
}
