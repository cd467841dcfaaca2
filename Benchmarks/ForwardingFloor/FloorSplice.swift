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
import NIOPosix
import PinproxyTLS

/// The app's side: bytes to the upstream, flushed once per read burst.
final class SpliceForwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private enum Upstream {
        case none
        case dialling(pending: [ByteBuffer])
        case ready(any Channel)
        case closed
    }

    private let target: (host: String, port: Int)
    private let contexts: Contexts
    private var upstream = Upstream.none

    init(target: (host: String, port: Int), contexts: Contexts) {
        self.target = target
        self.contexts = contexts
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        switch upstream {
        case .none:
            upstream = .dialling(pending: [bytes])
            dial(context: context)
        case .dialling(var pending):
            pending.append(bytes)
            upstream = .dialling(pending: pending)
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
        let contexts = self.contexts
        let host = target.host
        let app = NIOLoopBound(context, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(clientContext: contexts.upstream, serverName: host))
                    try sync.addHandler(SpliceBackward(app: app.value))
                }
            }
            .connect(host: target.host, port: target.port)
            .assumeIsolated().whenComplete { result in
                guard case .dialling(let pending) = self.upstream else {
                    if case .success(let channel) = result { channel.close(promise: nil) }
                    return
                }
                switch result {
                case .failure:
                    self.upstream = .closed
                    context.close(promise: nil)
                case .success(let channel):
                    self.upstream = .ready(channel)
                    for bytes in pending { channel.write(bytes, promise: nil) }
                    channel.flush()
                }
            }
    }
}

/// The upstream's side: bytes back to the app, flushed once per read burst.
final class SpliceBackward: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let app: ChannelHandlerContext

    init(app: ChannelHandlerContext) {
        self.app = app
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        app.write(data, promise: nil)
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
