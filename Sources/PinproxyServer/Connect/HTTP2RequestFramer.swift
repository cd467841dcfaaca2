import NIOCore
import NIOHTTP1

/// Between an app stream's HTTP/1 codec and its exchange handler: gives
/// every HTTP/2 request the framing that HTTP/1.1 would have given it.
///
/// HTTP/2 ends a request body with END_STREAM, not with a header. The codec
/// writes `transfer-encoding: chunked` for a body of unknown length, except
/// for the methods it assumes bodiless (GET, HEAD, DELETE, TRACE), where it
/// writes nothing; DATA may follow all the same. Sent upstream over HTTP/1.1
/// behind a head that frames nothing, those bytes would be read as the next
/// request on that connection (request smuggling, which could hand the app
/// the bearer token pinproxy attached to somebody else's request).
///
/// So a head that frames nothing is held until the stream says which it is:
/// its end (no body: the head goes on as it is), or its first byte of body
/// (the head goes on with `transfer-encoding: chunked`, as an HTTP/1.1 app
/// would have sent it). Empty DATA frames say nothing and are dropped. The
/// exchange itself refuses any body its head does not frame
/// (`RequestFraming.excess`), so this is what keeps such requests working,
/// not what keeps them safe.
///
/// A stream that sends such a head and then nothing is not held for ever:
/// after `idle_timeout` its head goes on framed `chunked`, and the exchange's
/// own body deadline answers it (408) and writes its access line.
final class HTTP2RequestFramer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private enum State {
        case awaitingHead
        /// The head frames no body and the stream has not ended yet.
        case holding(HTTPRequestHead)
        case passing
    }

    private var state = State.awaitingHead
    private let idleTimeout: TimeAmount
    private var stall: Scheduled<Void>?

    init(idleTimeout: TimeAmount) {
        self.idleTimeout = idleTimeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch state {
        case .awaitingHead:
            guard case .head(let head) = part, Self.framesNothing(head) else {
                state = .passing
                context.fireChannelRead(data)
                return
            }
            state = .holding(head)
            guard idleTimeout > .zero else { return }  // idle_timeout 0: no deadline, as for bodies
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            stall = context.eventLoop.scheduleTask(in: idleTimeout) {
                let (framer, context) = bound.value
                framer.release(context: context, then: nil)
            }
        case .holding:
            if case .body(let body) = part, body.readableBytes == 0 { return }  // says nothing yet
            release(context: context, then: part)
        case .passing:
            context.fireChannelRead(data)
        }
    }

    /// Sends the held head on, then `part`. The head is framed `chunked`
    /// unless the stream ended with it; with no part (the stall), the head
    /// goes alone and the exchange waits for its body under its own deadline.
    private func release(context: ChannelHandlerContext, then part: HTTPServerRequestPart?) {
        guard case .holding(var head) = state else { return }
        stall?.cancel()
        stall = nil
        state = .passing
        if case .end? = part {} else { head.headers.add(name: "transfer-encoding", value: "chunked") }
        context.fireChannelRead(wrapInboundOut(.head(head)))
        if let part {
            context.fireChannelRead(wrapInboundOut(part))
        } else {
            context.fireChannelReadComplete()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stall?.cancel()
        stall = nil
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // The exchange asks for reads once it has a head; while the head is
        // held here, the stream's next frame is this handler's to ask for.
        if case .holding = state { context.read() }
        context.fireChannelReadComplete()
    }

    /// A head with neither `content-length` nor `transfer-encoding`.
    static func framesNothing(_ head: HTTPRequestHead) -> Bool {
        !head.headers.contains(name: "content-length") && !head.headers.contains(name: "transfer-encoding")
    }
}
