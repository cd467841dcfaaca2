import NIOCore

/// Loops on the transparent listener, refused before anything is dialled:
/// a connection the kernel did not redirect (its "original" destination is
/// this listener, or there is none), and pinproxy's own upstream dial sent
/// back to it by a rule that does not exclude pinproxy's user.
enum TransparentLoop {
    /// The original destination, or the refusal.
    static func check(original: SocketAddress?, client: SocketAddress?, listener: SocketAddress?,
                      own: OwnUpstreamSockets = .shared) throws -> SocketAddress {
        guard let original else {
            throw ProxyError(.badRequest, host: nil,
                             detail: "redirect loop: the connection was not redirected (no original destination); only nftables redirect may send apps here")
        }
        if let listener, original.ipAddress == listener.ipAddress, original.port == listener.port {
            throw ProxyError(.badRequest, host: nil,
                             detail: "redirect loop: the original destination \(original.hostPort) is the transparent listener itself")
        }
        if own.contains(client: client, original: original) {
            throw ProxyError(.badRequest, host: nil,
                             detail: "redirect loop: \(client?.hostPort ?? "?") is pinproxy's own upstream connection; exclude pinproxy's user from the redirect (meta skuid)")
        }
        return original
    }
}
