import NIOCore
import NIOHTTP1
import PinproxyHTTP1

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

    /// Set while the writer is in a pipeline, for `writeForwarded`.
    private var context: ChannelHandlerContext?

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

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
        let (skip, chunked) = framing(head.status, version: head.version, hasLength: head.headers.contains(name: "content-length"))
        var buffer = context.channel.allocator.buffer(capacity: 256)
        HeadBytes.writeVersion(head.version, into: &buffer)
        Self.writeStatus(head.status, into: &buffer)
        guard HeadBytes.writeFields(head.headers, into: &buffer, skip: skip) else {
            return refuse(context: context, promise: promise)
        }
        finishHead(&buffer, chunked: chunked, context: context, promise: promise)
    }

    /// Writes the head an upstream sent (`ResponseHeadBytes`) to the app as a
    /// proxy forwards it, without making it into `HTTPHeaders`: HTTP/1.1 and
    /// the code's standard reason phrase (NIO's decoder drops the upstream's
    /// phrase and its encoder writes the standard one), each field `keeps`
    /// keeps, copied from the upstream's
    /// bytes and checked as any field is, then `Via: via` and, when
    /// `closing`, `Connection: close`. It is framed as a head written as a
    /// part is, and its body and end follow as parts. The bytes are those
    /// the same head gets made into NIO's head, edited, and written by
    /// `write` (`ForwardedHeadTests`).
    ///
    /// Called by the handler above, which holds this writer: a head kept as
    /// bytes is no part NIO's pipeline carries. The writes before it have
    /// passed this handler already, so it goes out in order.
    public func writeForwarded(_ head: ResponseHeadBytes, keeps: (UnsafeRawBufferPointer) -> Bool, via: StaticString, closing: Bool,
                               promise: EventLoopPromise<Void>?) {
        guard let context else { return promise?.fail(ChannelError.ioOnClosedChannel) ?? () }
        if case .refused = state { return promise?.fail(HTTPParserError.invalidHeaderToken) ?? () }
        let status = HTTPResponseStatus(statusCode: head.statusCode)
        var buffer = context.channel.allocator.buffer(capacity: head.bytes.readableBytes + 64)
        // The head's chunked framing, or nil when a field may not be sent.
        let framed = head.bytes.withUnsafeReadableBytes { bytes -> Bool? in
            let hasLength = head.parsed.fields.contains {
                let name = $0.name.bytes(in: bytes)
                return FieldNames.equal(name, "content-length") && keeps(name)
            }
            let (skip, chunked) = framing(status, version: .http1_1, hasLength: hasLength)
            buffer.writeStaticString("HTTP/1.1")
            Self.writeStatus(status, into: &buffer)
            for field in head.parsed.fields {
                let name = field.name.bytes(in: bytes)
                guard keeps(name) else { continue }
                guard HeadBytes.writeField(name, field.value.bytes(in: bytes), into: &buffer, skipped: skip != .none && skip.drops(name)) else {
                    return nil
                }
            }
            buffer.writeStaticString("Via: ")
            buffer.writeStaticString(via)
            buffer.writeStaticString("\r\n")
            if closing { buffer.writeStaticString("Connection: close\r\n") }
            return chunked
        }
        guard let chunked = framed else { return refuse(context: context, promise: promise) }
        finishHead(&buffer, chunked: chunked, context: context, promise: promise)
    }

    /// The framing of a final answer or an informational one, and which
    /// request it answers: NIO's automatic framing, without changing the
    /// fields. A status or a CONNECT with no body loses both framing
    /// fields; a body with a length loses `Transfer-Encoding`; otherwise
    /// HTTP/1.1 is chunked.
    private func framing(_ status: HTTPResponseStatus, version: HTTPVersion, hasLength: Bool) -> (HeadBytes.SkippedFields, chunked: Bool) {
        // An informational answer (but 101) is followed by the final one: it
        // does not answer the request, as NIO's decoder and encoder agree.
        let code = status.code
        var answersConnect = false
        if !((100..<200).contains(code) && code != 101), let method = methods.popFirst() {
            bodyless = method == .HEAD || method == .CONNECT
            answersConnect = method == .CONNECT
        }
        if answersConnect || !status.mayHaveResponseBody { return (.framing, false) }
        if hasLength { return (.transferEncoding, false) }
        if version.major == 1 && version.minor >= 1 { return (.transferEncoding, true) }
        return (.none, false)
    }

    /// ` 200 OK` and its line's end.
    private static func writeStatus(_ status: HTTPResponseStatus, into buffer: inout ByteBuffer) {
        buffer.writeStaticString(" ")
        buffer.writeString(String(status.code))
        buffer.writeStaticString(" ")
        buffer.writeString(status.reasonPhrase)
        buffer.writeStaticString("\r\n")
    }

    /// The framing field a chunked head adds, the blank line, and the write.
    private func finishHead(_ buffer: inout ByteBuffer, chunked: Bool, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
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
