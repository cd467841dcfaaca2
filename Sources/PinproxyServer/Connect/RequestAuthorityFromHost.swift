import NIOCore
import NIOHTTP2

/// Above a stream's HTTP/1 codec: a request head that names its host in one
/// `host` field and has no `:authority` gets that host as its `:authority`.
/// RFC 9113 §8.3.1 allows it (a client converting an HTTP/1.1 request may keep
/// `Host`), but swift-nio-http2's codec refuses a head without `:authority`.
/// The codec then keeps the `host` field as the HTTP/1 `Host`, so the exchange
/// checks it against the CONNECT host like any other (421 otherwise). A head
/// with neither, or with several `host` fields, goes on unchanged and is
/// refused as before (the codec's error ends the stream with RST_STREAM).
final class RequestAuthorityFromHost: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    /// Only the first HEADERS is the request head; later ones are trailers.
    private var sawHead = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !sawHead, case .headers(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        sawHead = true
        let hosts = head.headers["host"]
        if !head.headers.contains(name: ":authority"), hosts.count == 1 {
            head.headers.add(name: ":authority", value: hosts[0])
            context.fireChannelRead(wrapInboundOut(.headers(head)))
        } else {
            context.fireChannelRead(data)
        }
    }
}
