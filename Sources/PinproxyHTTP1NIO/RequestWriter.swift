import NIOCore
import NIOHTTP1
import PinproxyHTTP1

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
    /// Set while the writer is in a pipeline, for `writeForwarded`.
    private var context: ChannelHandlerContext?

    public init() {}

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    /// Writes an app's request head kept as its bytes (`RequestHeadBytes`'
    /// `bytes` and `parsed`) upstream as a proxy forwards it, without making
    /// it into `HTTPHeaders`: its method and target as they came, HTTP/1.1,
    /// each field `keeps` keeps, copied from the app's bytes, then `added`;
    /// every piece checked as `write` checks a head's (a target or a field
    /// NIO's validator would refuse fails the write and the pipeline with
    /// `HTTPParserError.invalidHeaderToken`). Framed, and followed by its
    /// body and end as parts, as a head written by `write` with the same
    /// fields is. The bytes are those that head is written as
    /// (`ForwardedRequestTests`).
    ///
    /// Called by the connection that holds this writer: a head kept as bytes
    /// is no part NIO's pipeline carries. The writes before it have passed
    /// this handler already, so it goes out in order.
    public func writeForwarded(_ bytes: ByteBuffer, _ parsed: ParsedHead, keeps: (UnsafeRawBufferPointer) -> Bool, added: HTTPHeaders,
                               promise: EventLoopPromise<Void>?) {
        guard let context else { return promise?.fail(ChannelError.ioOnClosedChannel) ?? () }
        if case .refused = state { return promise?.fail(HTTPParserError.invalidHeaderToken) ?? () }
        var buffer = context.channel.allocator.buffer(capacity: bytes.readableBytes + 128)
        // Whether the head may be sent and, if so, whether its first
        // `Transfer-Encoding` says chunked (as NIO's encoder reads it).
        let written = bytes.withUnsafeReadableBytes { bytes -> (sendable: Bool, transferEncoding: Bool?) in
            let target = parsed.target.bytes(in: bytes)
            guard HeadBytes.isTarget(target) else { return (false, nil) }
            buffer.writeBytes(parsed.method.bytes(in: bytes))
            buffer.writeStaticString(" ")
            buffer.writeBytes(target)
            buffer.writeStaticString(" HTTP/1.1\r\n")
            var transferEncoding: Bool?
            for field in parsed.fields {
                let name = field.name.bytes(in: bytes)
                guard keeps(name) else { continue }
                let value = field.value.bytes(in: bytes)
                guard HeadBytes.writeField(name, value, into: &buffer, skipped: false) else { return (false, nil) }
                if transferEncoding == nil, FieldNames.equal(name, "transfer-encoding") {
                    transferEncoding = value.elementsEqual("chunked".utf8)
                }
            }
            return (true, transferEncoding)
        }
        guard written.sendable, HeadBytes.writeFields(added, into: &buffer) else { return refuse(context: context, promise: promise) }
        buffer.writeStaticString("\r\n")
        let chunked = written.transferEncoding ?? (added.first(name: "transfer-encoding") == "chunked")
        state = .writing(chunked: chunked)
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }

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
