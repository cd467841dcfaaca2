import NIOCore
import NIOHTTP1

/// An upstream connection's HTTP/1 writer: NIO's request encoder (with
/// automatic framing off: the framing is pinproxy's) and its outbound
/// request validator in one handler, one pass over a head's fields instead
/// of two handlers and two. The bytes are NIO's, and so are the refusals:
/// a head whose method, target or fields may not be sent fails its write
/// and the pipeline's error with `HTTPParserError.invalidHeaderToken`
/// (`HeadWriterDifferential` compares the two on the same parts). Stricter
/// than NIO in one thing: after a refused head, the request's later parts
/// are refused too, rather than written without their head.
public final class RequestWriter: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = HTTPClientRequestPart
    public typealias OutboundOut = IOData

    private var state: WriterState = .idle

    public init() {}

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch (unwrapOutboundIn(data), state) {
        case (.head, .refused), (.body, .refused), (.end, .refused):
            promise?.fail(HTTPParserError.invalidHeaderToken)
        case (.head(let head), .idle), (.head(let head), .writing):
            guard head.method.isWritable, HeadBytes.isTarget(head.uri) else {
                return refuse(context: context, promise: promise)
            }
            var buffer = context.channel.allocator.buffer(capacity: 256)
            buffer.writeString(head.method.rawValue)
            buffer.writeStaticString(" ")
            buffer.writeString(head.uri)
            buffer.writeStaticString(" ")
            HeadBytes.writeVersion(head.version, into: &buffer)
            buffer.writeStaticString("\r\n")
            guard HeadBytes.writeFields(head.headers, into: &buffer) else {
                return refuse(context: context, promise: promise)
            }
            buffer.writeStaticString("\r\n")
            state = .writing(chunked: WriterState.isChunked(head.headers, version: head.version))
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        case (.body(let body), .writing(let chunked)):
            WriterState.writeBody(body, chunked: chunked, context: context, promise: promise, wrap: wrapOutboundOut)
        case (.end(let trailers), .writing(let chunked)):
            guard WriterState.writeEnd(trailers, chunked: chunked, context: context, promise: promise, wrap: wrapOutboundOut) else {
                return refuse(context: context, promise: promise)
            }
            state = .idle
        case (.body(let body), .idle):
            // A part with no head before it: written as NIO's encoder writes
            // it, unframed (pinproxy never sends one).
            context.write(wrapOutboundOut(body), promise: promise)
        case (.end(let trailers), .idle):
            if let trailers, !HeadBytes.areWritable(trailers) { return refuse(context: context, promise: promise) }
            WriterState.writeNothing(context: context, promise: promise, wrap: wrapOutboundOut)
        }
    }

    private func refuse(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        state = .refused
        promise?.fail(HTTPParserError.invalidHeaderToken)
        context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
    }
}
