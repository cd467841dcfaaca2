import NIOConcurrencyHelpers
import NIOCore

/// pinproxy's own upstream sockets, while they are open, each as its pair
/// of local and remote address. A transparent connection from one of them
/// is pinproxy's own dial redirected back to itself (an nftables rule
/// without the `meta skuid` exclusion): served, it would dial again, and
/// again. Process-wide, since every dial of this process counts.
///
/// The pair, not the local address alone: Linux gives one ephemeral port to
/// connections to different destinations, so an app's socket can have the
/// same local address as a pooled upstream connection of ours. The
/// redirected connection's source and original destination are exactly our
/// socket's local and remote address, and no other open socket has both.
final class OwnUpstreamSockets: Sendable {
    static let shared = OwnUpstreamSockets()

    private let open = NIOLockedValueBox<Set<Pair>>([])

    struct Pair: Hashable {
        var local: String
        var remote: String
    }

    func track(_ channel: any Channel) {
        guard let local = channel.localAddress?.hostPort, let remote = channel.remoteAddress?.hostPort else { return }
        let pair = Pair(local: local, remote: remote)
        track(pair)
        channel.closeFuture.whenComplete { _ in self.forget(pair) }
    }

    func track(_ pair: Pair) {
        open.withLockedValue { _ = $0.insert(pair) }
    }

    func forget(_ pair: Pair) {
        open.withLockedValue { _ = $0.remove(pair) }
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

    /// Whether a transparent connection from `client`, redirected from
    /// `original`, is one of ours.
    func contains(client: SocketAddress?, original: SocketAddress?) -> Bool {
        guard let local = client?.hostPort, let remote = original?.hostPort else { return false }
        return open.withLockedValue { $0.contains(Pair(local: local, remote: remote)) }
    }
}
