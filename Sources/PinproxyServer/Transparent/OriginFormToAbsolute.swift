import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// Plain HTTP redirected from port 80 arrives in origin-form (`GET /path`,
/// `Host: api.test`): the app thinks it talks to the server. Rewritten to
/// `http://HOST:ORIGINAL-PORT/path`, it takes the forward path of the
/// listener (policy by Host, `upgrade_to_tls`, admission, SSRF guard) with
/// nothing of its own. A request without Host is routed by the original
/// destination's address.
final class OriginFormToAbsolute: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = AppRequestPart
    typealias InboundOut = AppRequestPart

    let original: SocketAddress

    init(original: SocketAddress) {
        self.original = original
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let app) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        var head = app.whole
        let port = original.port ?? 80
        if head.method == .CONNECT {
            // Not a proxy listener: refused by the forward path's own check (400).
            head.uri = "connect:\(head.uri)"
        } else if head.uri.hasPrefix("/") {
            let hosts = head.headers["host"]
            // Two Host fields are refused downstream; one names the host, none leaves the address.
            let named = hosts.count == 1 ? Authority(hosts[0])?.host : nil
            let bracketed = HostPort.bracketed(named ?? original.ipAddress ?? "-")
            // Port 80 stays implicit, as the app wrote it (and `upgrade_to_tls` then dials 443).
            head.uri = "http://\(bracketed)\(port == 80 ? "" : ":\(port)")\(head.uri)"
        }
        context.fireChannelRead(wrapInboundOut(.head(.whole(head))))
    }
}
