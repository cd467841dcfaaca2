import NIOCore

/// One half of a blind byte splice between two channels on the same event
/// loop (the `tunnel` action). Reads, writes, flushes, half-closes and
/// closes cross over; reads are withheld while the partner cannot write, so
/// a slow side throttles the fast one.
final class GlueHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    /// Bytes moved out of this side's channel into the partner (for the access log).
    private(set) var bytesRelayed = 0
    var onClose: (() -> Void)?

    private init() {}

    static func matchedPair() -> (GlueHandler, GlueHandler) {
        let first = GlueHandler()
        let second = GlueHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private var partnerWritable: Bool { partner?.context?.channel.isWritable ?? false }

    private func partnerWrite(_ buffer: ByteBuffer) {
        partner?.context?.write(NIOAny(buffer), promise: nil)
    }

    private func partnerFlush() {
        partner?.context?.flush()
    }

    private func partnerWriteEOF() {
        partner?.context?.close(mode: .output, promise: nil)
    }

    private func partnerCloseFull() {
        partner?.context?.close(promise: nil)
    }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        bytesRelayed += buffer.readableBytes
        partnerWrite(buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partnerFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        partnerCloseFull()
        onClose?()
        onClose = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            partnerWriteEOF()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            partner?.partnerBecameWritable()
        }
    }

    func read(context: ChannelHandlerContext) {
        if partnerWritable {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
