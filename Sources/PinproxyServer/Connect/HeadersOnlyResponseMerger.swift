import NIOCore
import NIOHTTP2

/// Below a stream's HTTP/1 codec: a response head followed at once by its
/// end without a body (gRPC's trailers-only answer: an error status in the
/// head) goes out as one HEADERS frame with END_STREAM, as the upstream sent
/// it. The codec would write HEADERS, then an empty DATA frame, and a gRPC
/// client then finds no status where it looks for one.
final class HeadersOnlyResponseMerger: ChannelOutboundHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var held: (HTTP2Frame.FramePayload.Headers, EventLoopPromise<Void>?)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = unwrapOutboundIn(data)
        if let (headers, heldPromise) = held {
            held = nil
            if case .data(let data) = payload, data.endStream, data.data.readableBytes == 0 {
                var merged = headers
                merged.endStream = true
                heldPromise?.futureResult.cascade(to: promise)
                context.write(wrapOutboundOut(.headers(merged)), promise: heldPromise ?? promise)
                return
            }
            context.write(wrapOutboundOut(.headers(headers)), promise: heldPromise)
        }
        if case .headers(let headers) = payload, !headers.endStream {
            held = (headers, promise)
            return
        }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        held?.1?.fail(ChannelError.ioOnClosedChannel)
        held = nil
    }

    func flush(context: ChannelHandlerContext) {
        if let (headers, promise) = held {
            held = nil
            context.write(wrapOutboundOut(.headers(headers)), promise: promise)
        }
        context.flush()
    }
}
