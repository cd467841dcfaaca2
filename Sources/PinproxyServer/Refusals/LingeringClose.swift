import NIOCore

/// After a refusal that ends the connection the client may still be sending
/// (a 100 KB head, a request body). Closing at once would make the kernel
/// answer those bytes with a reset that destroys the refusal before the
/// client reads it. So, as RFC 9112 §9.6 advises: send FIN, discard what
/// still comes for a short while, then close.
enum LingeringClose {
    static let linger: TimeAmount = .seconds(2)

    /// Call on the channel's event loop, once the response is written.
    static func close(_ channel: any Channel) {
        channel.eventLoop.preconditionInEventLoop()
        guard channel.isActive else { return }
        // First in the pipeline, so nothing reaches a decoder in an error state.
        guard (try? channel.pipeline.syncOperations.addHandler(Discarder(), position: .first)) != nil else {
            channel.close(promise: nil)
            return
        }
        channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
        channel.setOption(.autoRead, value: true).whenFailure { _ in }
        channel.eventLoop.scheduleTask(in: linger) { channel.close(promise: nil) }
    }

    /// Swallows everything inbound; closes when the client does.
    private final class Discarder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? ChannelEvent, event == .inputClosed { context.close(promise: nil) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
