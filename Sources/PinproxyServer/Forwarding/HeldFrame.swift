import NIOCore
import NIOHTTP2

/// The one outbound frame an h2 stream adapter holds back until the next
/// part shows whether END_STREAM can ride on it: a message's last HEADERS
/// or DATA carries the end, a response's (`HTTP2StreamAdapter`) as a
/// request's (`UpstreamHTTP2StreamAdapter`).
struct HeldFrame {
    private var held: (payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)?

    mutating func hold(_ payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?) {
        held = (payload, promise)
    }

    /// Writes the held frame as it is, if any: the next part is not the end,
    /// or a flush came. The adapter's outbound type is the frame payload.
    mutating func write(on context: ChannelHandlerContext) {
        guard let (payload, promise) = take() else { return }
        context.write(NIOAny(payload), promise: promise)
    }

    /// Writes the end of the stream: END_STREAM set on the held frame (the
    /// end's `promise` completes with it), or, with nothing held, an empty
    /// DATA frame that carries it.
    mutating func writeEnd(promise: EventLoopPromise<Void>?, on context: ChannelHandlerContext) {
        guard case (var last, let heldPromise)? = take() else {
            context.write(NIOAny(HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(Self.empty), endStream: true))), promise: promise)
            return
        }
        switch last {
        case .headers(var headers):
            // The enum lets go of the block first: a HEADERS frame's fields
            // are copy-on-write, and with two holders setting the flag
            // copied them (an allocation per stream, issue 33).
            last = Self.placeholder
            headers.endStream = true
            last = .headers(headers)
        case .data(var data):
            data.endStream = true
            last = .data(data)
        default:
            break  // only HEADERS and DATA are held
        }
        heldPromise?.futureResult.cascade(to: promise)
        context.write(NIOAny(last), promise: heldPromise ?? promise)
    }

    /// What the held frame's enum holds for a moment while its HEADERS are
    /// changed in place: a payload without storage.
    private static let placeholder = HTTP2Frame.FramePayload.windowUpdate(windowSizeIncrement: 0)

    /// An empty DATA frame's bytes, shared (a `ByteBuffer` is a value).
    private static let empty = ByteBuffer()

    private mutating func take() -> (payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)? {
        defer { held = nil }
        return held
    }

    /// The stream failed or its channel went away before the frame was written.
    /// The error is made only when a frame was held: boxing one is an
    /// allocation, and every stream's handler removal asks (issue 33).
    mutating func fail(_ error: @autoclosure () -> any Error) {
        take()?.promise?.fail(error())
    }
}
