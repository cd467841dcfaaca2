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

    /// The held frame as it is, to be written now; nil when nothing is held.
    mutating func take() -> (payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)? {
        defer { held = nil }
        return held
    }

    /// The held frame with END_STREAM set and the promise to write it with
    /// (`promise`, the end's, completes with it); nil when nothing is held.
    mutating func takeEnding(promise: EventLoopPromise<Void>?) -> (payload: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?)? {
        guard let (payload, heldPromise) = take() else { return nil }
        var last = payload
        switch last {
        case .headers(var headers):
            headers.endStream = true
            last = .headers(headers)
        case .data(var data):
            data.endStream = true
            last = .data(data)
        default:
            break  // only HEADERS and DATA are held
        }
        heldPromise?.futureResult.cascade(to: promise)
        return (last, heldPromise ?? promise)
    }

    /// The stream failed or its channel went away before the frame was written.
    /// The error is made only when a frame was held: boxing one is an
    /// allocation, and every stream's handler removal asks (issue 33).
    mutating func fail(_ error: @autoclosure () -> any Error) {
        take()?.promise?.fail(error())
    }
}
