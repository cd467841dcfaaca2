import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The upstream edge of one h2 stream an exchange holds: its request parts
/// become frame payloads and the server's frames become response parts,
/// directly, where swift-nio-http2's `HTTP2FramePayloadToHTTP1ClientCodec`
/// stood (the same frames and the same heads: an h2 app's request head sent
/// as the app's block edited, `sendForwarded`, any other converted once,
/// `HTTP2HeaderBlocks`; the response's kept as its block,
/// `HTTP2ResponseBlock`, and made whole only for what reads it whole).
/// `NIOHTTP2Handler` validates both directions' blocks, and the DATA
/// against `content-length`, before and after this.
///
/// The request's last frame is held until the next part, a flush or the
/// end, so that END_STREAM rides on it (a bodiless request is one HEADERS
/// frame) rather than on an empty DATA frame of its own.
///
/// It is the stream's only handler: the stream's `UpstreamHTTPHandler` is
/// called directly, with this handler's context, for every inbound event,
/// and the exchange's parts come in through `send` when it writes on the
/// stream's loop. A second handler in the pipeline cost each response part
/// a pipeline hop and a dynamic cast out of `NIOAny`, and each stream a
/// context (issue 33, bench/README.md).
final class UpstreamHTTP2StreamAdapter: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
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
    /// The stream's top, which hands the response to the exchange.
    let handler: UpstreamHTTPHandler
    /// For `send`; nil before the adapter joins its pipeline and once it left.
    private var context: ChannelHandlerContext?

    init(handler: UpstreamHTTPHandler) {
        self.handler = handler
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        handler.handlerAdded(context: context)
    }

    // MARK: Request

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        send(unwrapOutboundIn(data), promise: promise, context: context)
    }

    /// A request part from the exchange, called on the stream's event loop
    /// in place of a write through the pipeline; false when the adapter is
    /// not (or no longer) in a pipeline, and the part must go as a write.
    func send(_ part: HTTPClientRequestPart, promise: EventLoopPromise<Void>?) -> Bool {
        guard let context else { return false }
        send(part, promise: promise, context: context)
        return true
    }

    /// An app's HTTP/2 head forwarded as its block, edited, in place of a
    /// head made whole and turned back into a block; false when the adapter
    /// is not (or no longer) in a pipeline, and the head must go whole.
    func sendForwarded(_ head: ForwardedRequestBlock) -> Bool {
        guard let context else { return false }
        sendHead(method: head.app.method, promise: nil, context: context) { try head.upstreamBlock(scheme: "https") }
        return true
    }

    private func sendHead(method: HTTPMethod, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext,
                          block makeBlock: () throws -> HPACKHeaders) {
        let block: HPACKHeaders
        do {
            block = try makeBlock()
        } catch {
            promise?.fail(error)
            context.fireErrorCaught(error)
            return
        }
        response = .awaitingHead(request: method)
        pending.write(on: context)
        pending.hold(.headers(.init(headers: block)), promise: promise)
    }

    private func send(_ part: HTTPClientRequestPart, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            sendHead(method: head.method, promise: promise, context: context) { try HTTP2HeaderBlocks.requestBlock(head, scheme: "https") }
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
        handler.errorCaught(context: context, error: error)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        pending.fail(ChannelError.ioOnClosedChannel)
        handler.handlerRemoved(context: context)
    }

    // MARK: The stream's events, to its handler

    func channelActive(context: ChannelHandlerContext) {
        handler.channelActive(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        handler.channelInactive(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        handler.channelReadComplete(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        handler.channelWritabilityChanged(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        handler.userInboundEventTriggered(context: context, event: event)
    }

    // MARK: Response

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            receivedHeaders(headers, context: context)
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return }
            if bytes.readableBytes > 0 || !data.endStream { handler.received(.body(bytes), context: context) }
            if data.endStream { handler.received(.end(nil), context: context) }
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
                handler.received(.head(.block(head)), context: context)
                if headers.endStream { handler.received(.end(nil), context: context) }
            } catch {
                errorCaught(context: context, error: error)
            }
        case .receiving:
            handler.received(.end(HTTP2HeaderBlocks.fields(headers.headers)), context: context)
        case nil:
            // Push is off: a server's HEADERS before the request went is a protocol error.
            errorCaught(context: context, error: HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":status"))
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
