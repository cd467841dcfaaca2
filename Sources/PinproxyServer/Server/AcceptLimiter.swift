import NIOConcurrencyHelpers
import NIOCore

/// `limits.max_client_connections`: at the limit the listener stops
/// accepting (it withholds `read()` on the server channel), so further
/// clients wait in the kernel's backlog instead of being accepted and dropped.
final class AcceptLimiter: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never

    private let limit: Int
    private var open = 0
    private var readWithheld = false

    init(limit: Int) {
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let child = unwrapInboundIn(data)
        open += 1
        let loop = context.eventLoop
        child.closeFuture.hop(to: loop).assumeIsolated().whenComplete { _ in
            self.open -= 1
            if self.readWithheld && self.open < self.limit {
                self.readWithheld = false
                context.read()
            }
        }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        if open >= limit {
            readWithheld = true
        } else {
            context.read()
        }
    }
}
