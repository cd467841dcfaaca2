// `pinproxy-floor --splice` (bench/run's "floor-splice"): below the floor.
//
// After the CONNECT and the app's TLS, the app's bytes go to an upstream TLS
// connection as they come, and the upstream's back: no HTTP layer on either
// leg. What a keep-alive request costs here is TLS on both legs, NIO's
// channels and the kernel. The floor minus this is what HTTP/1 costs there,
// parsing and re-encoding both heads on both legs: the most that a
// purpose-built head path (issue 33, item 4) could take off pinproxy. It
// cannot be a proxy: nothing here knows where one request ends, so an app
// connection has its own upstream connection, dialled at its first bytes.
import NIOCore

/// The app's side: bytes to the upstream, flushed once per read burst
/// (with `--raw-heads`, each request head rewritten on the way).
final class SpliceForwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let target: (host: String, port: Int)
    private let contexts: Contexts
    private var upstream = UpstreamLeg<ByteBuffer>.none
    private var heads: RawHeads?

    init(target: (host: String, port: Int), contexts: Contexts) {
        self.target = target
        self.contexts = contexts
        heads = contexts.http1.heads(.request)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let bytes = RawHeads.forward(unwrapInboundIn(data), through: &heads, context: context) else { return }
        switch upstream {
        case .none, .dialling:
            if upstream.hold(bytes) { dial(context: context) }
        case .ready(let channel):
            channel.write(bytes, promise: nil)
        case .closed:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if case .ready(let channel) = upstream { channel.flush() }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // The app reads slower than the upstream sends (1 MiB bodies): as the floor's `Forwarder`.
        if case .ready(let channel) = upstream {
            channel.setOption(.autoRead, value: context.channel.isWritable).whenFailure { _ in }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .ready(let channel) = upstream { channel.close(promise: nil) }
        upstream = .closed
        context.fireChannelInactive()
    }

    private func dial(context: ChannelHandlerContext) {
        let app = NIOLoopBound(context, eventLoop: context.eventLoop)
        let heads = contexts.http1.heads(.response)
        FloorDial.connect(target, tls: contexts.upstream, on: context.eventLoop) { sync in
            try sync.addHandler(SpliceBackward(app: app.value, heads: heads))
        }.assumeIsolated().whenComplete { result in
            self.upstream.dialled(result, app: context)
        }
    }
}

/// The upstream's side: bytes back to the app, flushed once per read burst
/// (with `--raw-heads`, each response head rewritten on the way).
final class SpliceBackward: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let app: ChannelHandlerContext
    private var heads: RawHeads?

    init(app: ChannelHandlerContext, heads: RawHeads?) {
        self.app = app
        self.heads = heads
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let bytes = RawHeads.forward(unwrapInboundIn(data), through: &heads, context: context) else { return }
        app.write(NIOAny(bytes), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        app.flush()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        app.close(promise: nil)
        context.fireChannelInactive()
    }
}
