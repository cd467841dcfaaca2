import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// The edge of an exchange on one app HTTP/2 stream: the stream's frame
/// payloads become the exchange's request parts, and its response parts
/// become frame payloads, directly. It stands where swift-nio-http2's
/// `HTTP2FramePayloadToHTTP1ServerCodec` and three handlers around it stood
/// (`host` as the authority, the request's framing, a headers-only answer
/// kept as one frame), in one handler: per request that is three channel
/// handlers fewer and no intermediate header arrays (bench/README.md,
/// 2026-11-27). The request's head is not converted at all (its block is
/// read, `AppRequestBlock`); a response head made whole is, once
/// (`HTTP2HeaderBlocks`).
///
/// Requests (docs/contract.md §11): HEADERS is the head (a malformed head is
/// an error, and the exchange resets the stream); DATA is body, END_STREAM
/// the end, a second HEADERS the trailers. HTTP/2 ends a body with
/// END_STREAM, not with a header, and a head that frames no body (GET, HEAD,
/// DELETE, CONNECT or TRACE without `content-length`) may still be followed
/// by DATA: sent upstream over HTTP/1.1 behind a head that frames nothing,
/// those bytes would be read as the next request on that connection
/// (smuggling, which could hand the app a token attached to somebody else's
/// request). So such a head is held until the stream says which it is: its
/// end (no body: the head goes on as it is) or its first byte of body (the
/// head goes on with `transfer-encoding: chunked`). Empty DATA frames say
/// nothing and are dropped. After `idle_timeout` with neither, the head goes
/// on chunked and the exchange's own body deadline answers it (408). The
/// exchange itself refuses any body its head does not frame, so the holding
/// keeps such requests working, not safe.
///
/// Responses: each part is one frame, and END_STREAM rides on the last
/// frame written before the end, as the upstream sent it: a final head
/// followed at once by its end (gRPC's trailers-only answer) is one HEADERS
/// frame with END_STREAM, a body's last DATA carries it, and trailers are
/// HEADERS with END_STREAM. So the frame a head or a DATA makes is held
/// until the next part or a flush; a flush between the last frame and the
/// end sends that frame as it is, and the end then goes as an empty DATA
/// with END_STREAM (one frame fewer per response than an empty DATA
/// after every body: issue 33).
final class HTTP2StreamAdapter: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = AppRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTP2Frame.FramePayload

    private enum Request {
        case awaitingHead
        /// The head frames no body and the stream has not ended yet.
        case holding(AppRequestBlock)
        /// The head went on: DATA is body, HEADERS the trailers.
        case passing
        /// The request ended, or a malformed head was refused: nothing more
        /// goes to the exchange (NIO's stream state refuses frames after
        /// END_STREAM; this holds without it too).
        case over
    }

    private var request = Request.awaitingHead
    private let idleTimeout: TimeAmount
    /// For `send` and `writeForwarded`, which the exchange calls directly.
    private var context: ChannelHandlerContext?
    /// The stream's exchange, handed each request part directly (let go when
    /// the adapter leaves the pipeline). Nil: parts go on through the pipeline.
    var exchange: HTTPExchangeHandler?
    private var stall: Scheduled<Void>?
    /// A final response head or a DATA not yet written: it may end the stream itself.
    private var held = HeldFrame()

    init(idleTimeout: TimeAmount) {
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    // MARK: Request

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            receivedHeaders(headers, context: context)
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return }  // the network hands on bytes only
            receivedBody(bytes, endStream: data.endStream, context: context)
        default:
            break  // RST_STREAM, WINDOW_UPDATE, PRIORITY: NIO's and the stream channel's
        }
    }

    private func receivedHeaders(_ headers: HTTP2Frame.FramePayload.Headers, context: ChannelHandlerContext) {
        switch request {
        case .awaitingHead:
            let head: AppRequestBlock
            do {
                head = try AppRequestBlock(headers.headers, endStream: headers.endStream)
            } catch {
                request = .over
                context.fireErrorCaught(error)
                return
            }
            if headers.endStream {
                request = .over
                deliver(.head(.block(head)), context: context)
                deliver(.end(nil), context: context)
            } else if head.framesNothing {
                hold(head, context: context)
            } else {
                request = .passing
                deliver(.head(.block(head)), context: context)
            }
        case .holding:
            release(context: context, then: .end(HTTP2HeaderBlocks.fields(headers.headers)))
        case .passing:
            request = .over
            deliver(.end(HTTP2HeaderBlocks.fields(headers.headers)), context: context)
        case .over:
            break
        }
    }

    private func receivedBody(_ bytes: ByteBuffer, endStream: Bool, context: ChannelHandlerContext) {
        switch request {
        case .holding:
            if bytes.readableBytes == 0 {
                if endStream { release(context: context, then: .end(nil)) }  // else: says nothing yet
                return
            }
            release(context: context, then: .body(bytes))
            if endStream { end(context: context) }
        case .passing:
            if bytes.readableBytes > 0 || !endStream { deliver(.body(bytes), context: context) }
            if endStream { end(context: context) }
        case .awaitingHead, .over:
            break  // DATA before HEADERS is NIO's protocol error
        }
    }

    private func end(context: ChannelHandlerContext) {
        request = .over
        deliver(.end(nil), context: context)
    }

    private func hold(_ head: AppRequestBlock, context: ChannelHandlerContext) {
        request = .holding(head)
        guard idleTimeout > .zero else { return }  // idle_timeout 0: no deadline, as for bodies
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        stall = context.eventLoop.scheduleTask(in: idleTimeout) {
            let (adapter, context) = bound.value
            adapter.release(context: context, then: nil)
        }
    }

    /// Sends the held head on, then `part`. The head is framed `chunked`
    /// unless the stream ended with it; with no part (the stall), the head
    /// goes alone and the exchange waits for its body under its own deadline.
    private func release(context: ChannelHandlerContext, then part: AppRequestPart?) {
        guard case .holding(var head) = request else { return }
        stall?.cancel()
        stall = nil
        request = .passing
        if case .end? = part { request = .over } else { head.frameChunked() }
        deliver(.head(.block(head)), context: context)
        if let part {
            deliver(part, context: context)
        } else {
            context.fireChannelReadComplete()
        }
    }

    /// A request part to the exchange: called directly, where a pipeline
    /// hop cost each part a dynamic cast out of `NIOAny` (issue 33).
    private func deliver(_ part: AppRequestPart, context: ChannelHandlerContext) {
        guard let exchange else { return context.fireChannelRead(wrapInboundOut(part)) }
        exchange.streamReceived(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The exchange asks for reads once it has a head; while the head is
        // held here, the stream's next frame is this handler's to ask for.
        if case .holding = request { context.read() }
        context.fireChannelReadComplete()
    }

    // MARK: Response

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        send(unwrapOutboundIn(data), promise: promise, context: context)
    }

    /// A response part from the exchange, in place of a write through the
    /// pipeline (the exchange is on the stream's loop); false when the
    /// adapter has left the pipeline, and the part must go as a write.
    func send(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) -> Bool {
        guard let context else { return false }
        send(part, promise: promise, context: context)
        return true
    }

    private func send(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            held.write(on: context)
            let headers = HTTP2Frame.FramePayload.Headers(headers: HTTP2HeaderBlocks.responseBlock(head))
            if head.status.code < 200 {
                context.write(wrapOutboundOut(.headers(headers)), promise: promise)  // informational: more follows
            } else {
                held.hold(.headers(headers), promise: promise)
            }
        case .body(let body):
            held.write(on: context)
            held.hold(.data(.init(data: body)), promise: promise)
        case .end(let trailers?):
            held.write(on: context)
            let block = HTTP2Frame.FramePayload.Headers(headers: HTTP2HeaderBlocks.trailerBlock(trailers), endStream: true)
            context.write(wrapOutboundOut(.headers(block)), promise: promise)
        case .end(nil):
            // END_STREAM on the last frame written, else on an empty DATA.
            held.writeEnd(promise: promise, on: context)
        }
    }

    /// A final response head that is already a block (an HTTP/2 upstream's,
    /// edited: `HTTP2ResponseBlock.forwarded`), held as `write` holds a head
    /// made whole. The exchange calls this in place of writing the head
    /// through the pipeline, which carries heads made whole.
    func writeForwarded(_ block: HPACKHeaders) {
        guard let context else { return }  // removed: the stream is gone
        held.write(on: context)
        held.hold(.headers(.init(headers: block)), promise: nil)
    }

    func flush(context: ChannelHandlerContext) {
        held.write(on: context)
        context.flush()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        exchange = nil  // it holds this adapter: no cycle once the stream is gone
        stall?.cancel()
        stall = nil
        held.fail(ChannelError.ioOnClosedChannel)
    }
}
