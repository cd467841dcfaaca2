import NIOConcurrencyHelpers
import NIOCore

/// The local addresses of pinproxy's own upstream sockets, while they are
/// open. A transparent connection from one of them is pinproxy's own dial
/// redirected back to itself (an nftables rule without the `meta skuid`
/// exclusion): served, it would dial again, and again. Process-wide, since
/// every dial of this process counts.
final class OwnUpstreamSockets: Sendable {
    static let shared = OwnUpstreamSockets()

    private let open = NIOLockedValueBox<Set<String>>([])

    func track(_ channel: any Channel) {
        guard let local = channel.localAddress?.hostPort else { return }
        open.withLockedValue { _ = $0.insert(local) }
        channel.closeFuture.whenComplete { _ in self.open.withLockedValue { _ = $0.remove(local) } }
    }

    /// First in an upstream pipeline: records the socket as it becomes
    /// active, before the handlers after it send anything (a TLS ClientHello).
    final class Tracker: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny

        func channelActive(context: ChannelHandlerContext) {
            OwnUpstreamSockets.shared.track(context.channel)
            context.fireChannelActive()
        }
    }

    /// Whether `address` (a transparent connection's source) is one of ours.
    func contains(_ address: SocketAddress?) -> Bool {
        guard let key = address?.hostPort else { return false }
        return open.withLockedValue { $0.contains(key) }
    }
}
