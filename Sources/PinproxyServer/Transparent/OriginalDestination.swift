#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Where a redirected connection was going before nftables `redirect` (or
/// iptables `REDIRECT`) sent it here: netfilter's conntrack entry, read with
/// `SO_ORIGINAL_DST` (IPv4) or `IP6T_SO_ORIGINAL_DST` (IPv6).
enum OriginalDestination {
    /// Both options are 80 in <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>.
    private static let optionName: Int32 = 80

    /// nil when the kernel knows none (no NAT on this connection, or no
    /// conntrack): the connection was not redirected.
    static func of(_ channel: any Channel) -> EventLoopFuture<SocketAddress?> {
        guard let provider = channel as? any SocketOptionProvider, let local = channel.localAddress else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let name = NIOBSDSocket.Option(rawValue: optionName)
        switch local {
        case .v4:
            let future: EventLoopFuture<sockaddr_in> = provider.unsafeGetSocketOption(
                level: NIOBSDSocket.OptionLevel(rawValue: Int32(IPPROTO_IP)), name: name)
            return future.map { Optional(SocketAddress($0, host: "")) }.recover { _ in nil }
        case .v6:
            let future: EventLoopFuture<sockaddr_in6> = provider.unsafeGetSocketOption(
                level: NIOBSDSocket.OptionLevel(rawValue: Int32(IPPROTO_IPV6)), name: name)
            return future.map { Optional(SocketAddress($0, host: "")) }.recover { _ in nil }
        case .unixDomainSocket:
            return channel.eventLoop.makeSucceededFuture(nil)
        }
    }
}
