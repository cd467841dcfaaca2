import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The upstream edge of one h2 stream an exchange holds: its request parts
/// become frame payloads and the server's frames become response parts,
/// directly, where swift-nio-http2's `HTTP2FramePayloadToHTTP1ClientCodec`
/// stood (the same frames and the same heads: the request's head converted
/// once, `HTTP2HeaderBlocks`; the response's kept as its block,
/// `HTTP2ResponseBlock`, and made whole only for what reads it whole).
/// `NIOHTTP2Handler` validates both directions'
/// blocks, and the DATA against `content-length`, before and after this.
///
/// The request's last frame is held until the next part, a flush or the
/// end, so that END_STREAM rides on it (a bodiless request is one HEADERS
/// frame) rather than on an empty DATA frame of its own.
final class UpstreamHTTP2StreamAdapter: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = UpstreamResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTP2Frame.FramePayload

    private enum Response {
        /// The request's method decides whether a response frames a body.
        case awaitingHead(request: HTTPMethod)
        /// The final head arrived: HEADERS now are its trailers.
        case receiving
    }

    private var response: Response?
    /// The request's last frame, not yet written.
    private var pending = HeldFrame()

    // MARK: Request

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            let block: HPACKHeaders
            do {
                block = try HTTP2HeaderBlocks.requestBlock(head, scheme: "https")
            } catch {
                promise?.fail(error)
                context.fireErrorCaught(error)
                return
            }
            response = .awaitingHead(request: head.method)
            pending.write(on: context)
            pending.hold(.headers(.init(headers: block)), promise: promise)
        case .body(let body):
            pending.write(on: context)
            pending.hold(.data(.init(data: body)), promise: promise)
        case .end(let trailers?):
            pending.write(on: context)
            let block = HTTP2Frame.FramePayload.Headers(headers: HTTP2HeaderBlocks.trailerBlock(trailers), endStream: true)
            context.write(wrapOutboundOut(.headers(block)), promise: promise)
        case .end(nil):
            // END_STREAM on the last frame written, else on an empty DATA.
            pending.writeEnd(promise: promise, on: context)
        }
    }

    func flush(context: ChannelHandlerContext) {
        pending.write(on: context)
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        pending.fail(error)
        context.fireErrorCaught(error)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        pending.fail(ChannelError.ioOnClosedChannel)
    }

    // MARK: Response

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            receivedHeaders(headers, context: context)
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return }
            if bytes.readableBytes > 0 || !data.endStream { context.fireChannelRead(wrapInboundOut(.body(bytes))) }
            if data.endStream { context.fireChannelRead(wrapInboundOut(.end(nil))) }
        default:
            break
        }
    }

    private func receivedHeaders(_ headers: HTTP2Frame.FramePayload.Headers, context: ChannelHandlerContext) {
        switch response {
        case .awaitingHead(let method):
            do {
                let head = try HTTP2ResponseBlock(headers.headers, request: method, endStream: headers.endStream)
                if head.status >= 200 { response = .receiving }
                context.fireChannelRead(wrapInboundOut(.head(.block(head))))
                if headers.endStream { context.fireChannelRead(wrapInboundOut(.end(nil))) }
            } catch {
                context.fireErrorCaught(error)
            }
        case .receiving:
            context.fireChannelRead(wrapInboundOut(.end(HTTP2HeaderBlocks.fields(headers.headers))))
        case nil:
            // Push is off: a server's HEADERS before the request went is a protocol error.
            context.fireErrorCaught(HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":status"))
        }
    }
}

extension HTTP2HeaderBlocks {
    /// The block for a request upstream: the pseudo-headers in NIO's codec's
    /// order, `Host` as `:authority` (exactly one), then the other fields,
    /// normalised as a response's are.
    static func requestBlock(_ head: HTTPRequestHead, scheme: String) throws -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(head.headers.count + 3)
        block.add(name: ":path", value: head.uri)
        block.add(name: ":method", value: head.method.rawValue)
        block.add(name: ":scheme", value: scheme)
        var authority: String?
        for (name, value) in head.headers where name.utf8.count == 4 && lowercased(name) == "host" {
            guard authority == nil else { throw Malformed.requestWithoutHost }
            authority = value
        }
        guard let authority else { throw Malformed.requestWithoutHost }
        block.add(name: ":authority", value: authority)
        appendNormalised(head.headers, to: &block, droppingHost: true)
        return block
    }
}
