import NIOCore
import NIOHTTP1

/// The app's leg's HTTP/1 writer: NIO's response encoder (automatic framing
/// on, as `configureHTTPServerPipeline` makes it) and its outbound response
/// validator in one handler, one pass over a head's fields instead of two
/// handlers and two, and the framing fields left out as they are written
/// rather than removed from a copy of the fields. The bytes and the
/// refusals are NIO's (`HeadWriterDifferential`): a head or trailers that
/// may not be sent fail with `HTTPParserError.invalidHeaderToken`, and so
/// does everything after them.
///
/// NIO's request decoder tells its encoder each request's method, so that
/// an answer to `HEAD` or `CONNECT` goes without a body; that link is
/// NIO's own. This writer is told by the handler that reads the request
/// heads (`requestArrived`), in the order they arrive, rather than sit on
/// the way in itself, where every inbound part would pass through it.
public final class ResponseWriter: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = HTTPServerResponsePart
    public typealias OutboundOut = IOData

    private var state: WriterState = .idle
    /// The methods of the requests not yet answered, oldest first.
    private var methods = CircularBuffer<HTTPMethod>(initialCapacity: 2)
    /// The response being written answers a `HEAD` or a `CONNECT`: its
    /// body is refused, its framing fields kept.
    private var bodyless = false

    public init() {}

    /// A request head with `method` was read: a response will answer it.
    public func requestArrived(_ method: HTTPMethod) {
        methods.append(method)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch (unwrapOutboundIn(data), state) {
        case (_, .refused):
            promise?.fail(HTTPParserError.invalidHeaderToken)
        case (.head(let head), .idle), (.head(let head), .writing):
            writeHead(head, context: context, promise: promise)
        case (.body, _) where bodyless:
            promise?.fail(NIOHTTPResponseEncoderError.responseBodyNotAllowed)
        case (.body(let body), .writing(let chunked)):
            WriterState.writeBody(body, chunked: chunked, context: context, promise: promise, wrap: wrapOutboundOut)
        case (.body(let body), .idle):
            context.write(wrapOutboundOut(body), promise: promise)  // no head before it: as NIO, unframed
        case (.end(let trailers), .writing(let chunked)):
            bodyless = false
            guard WriterState.writeEnd(trailers, chunked: chunked, context: context, promise: promise, wrap: wrapOutboundOut) else {
                return refuse(context: context, promise: promise)
            }
            state = .idle
        case (.end(let trailers), .idle):
            bodyless = false
            if let trailers, !HeadBytes.areWritable(trailers) { return refuse(context: context, promise: promise) }
            WriterState.writeNothing(context: context, promise: promise, wrap: wrapOutboundOut)
        }
    }

    private func writeHead(_ head: HTTPResponseHead, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard head.status.isWritable else { return refuse(context: context, promise: promise) }
        // An informational answer (but 101) is followed by the final one: it
        // does not answer the request, as NIO's decoder and encoder agree.
        let code = head.status.code
        var answersConnect = false
        if !((100..<200).contains(code) && code != 101), let method = methods.popFirst() {
            bodyless = method == .HEAD || method == .CONNECT
            answersConnect = method == .CONNECT
        }
        // NIO's automatic framing, without changing the fields: a status or
        // a CONNECT with no body loses both framing fields; a body with a
        // length loses `Transfer-Encoding`; otherwise HTTP/1.1 is chunked.
        let skip: HeadBytes.SkippedFields
        let chunked: Bool
        if answersConnect || !head.status.mayHaveResponseBody {
            (skip, chunked) = (.framing, false)
        } else if head.headers.contains(name: "content-length") {
            (skip, chunked) = (.transferEncoding, false)
        } else if head.version.major == 1 && head.version.minor >= 1 {
            (skip, chunked) = (.transferEncoding, true)
        } else {
            (skip, chunked) = (.none, false)
        }
        var buffer = context.channel.allocator.buffer(capacity: 256)
        HeadBytes.writeVersion(head.version, into: &buffer)
        buffer.writeStaticString(" ")
        buffer.writeString(String(code))
        buffer.writeStaticString(" ")
        buffer.writeString(head.status.reasonPhrase)
        buffer.writeStaticString("\r\n")
        guard HeadBytes.writeFields(head.headers, into: &buffer, skip: skip) else {
            return refuse(context: context, promise: promise)
        }
        if chunked { buffer.writeStaticString("transfer-encoding: chunked\r\n") }
        buffer.writeStaticString("\r\n")
        state = .writing(chunked: chunked && !bodyless)
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }

    private func refuse(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        state = .refused
        promise?.fail(HTTPParserError.invalidHeaderToken)
        context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
    }
}
