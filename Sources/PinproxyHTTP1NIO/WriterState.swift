import NIOCore
import NIOHTTP1

/// Where a writer is in the message it writes, and the body and end
/// framing both writers share (the bytes NIO's encoders write).
enum WriterState: Equatable {
    /// Between messages.
    case idle
    /// A head went out; `chunked`: its body is framed in chunks.
    case writing(chunked: Bool)
    /// A part could not be sent: nothing more is (the pipeline was told).
    case refused

    /// Whether a message's own fields say its body is chunked, as NIO's
    /// encoders read them: HTTP/1.1 or later and a first
    /// `Transfer-Encoding` of exactly `chunked`.
    static func isChunked(_ fields: HTTPHeaders, version: HTTPVersion) -> Bool {
        version.major == 1 && version.minor >= 1 && fields.first(name: "transfer-encoding") == "chunked"
    }

    /// A body part: as it is, or as one chunk (an empty one is written as
    /// is, since an empty chunk would end the body).
    static func writeBody(_ body: IOData, chunked: Bool, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?,
                          wrap: (IOData) -> NIOAny) {
        guard chunked, body.readableBytes > 0 else {
            context.write(wrap(body), promise: promise)
            return
        }
        var line = HeadBytes.chunkSizeLine(body.readableBytes, allocator: context.channel.allocator)
        context.write(wrap(.byteBuffer(line)), promise: nil)
        context.write(wrap(body), promise: nil)
        line.moveReaderIndex(forwardBy: line.readableBytes - 2)  // its CRLF, which closes the chunk
        context.write(wrap(.byteBuffer(line)), promise: promise)
    }

    /// The end: the last chunk and trailers, or nothing. False when a
    /// trailer may not be sent (nothing was written).
    static func writeEnd(_ trailers: HTTPHeaders?, chunked: Bool, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?,
                         wrap: (IOData) -> NIOAny) -> Bool {
        guard chunked else {
            if let trailers, !HeadBytes.areWritable(trailers) { return false }
            writeNothing(context: context, promise: promise, wrap: wrap)
            return true
        }
        guard let last = HeadBytes.lastChunk(trailers, allocator: context.channel.allocator) else { return false }
        context.write(wrap(.byteBuffer(last)), promise: promise)
        return true
    }

    /// A write with no bytes, so that its promise completes in order with
    /// the writes before it; none when nobody waits.
    static func writeNothing(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?, wrap: (IOData) -> NIOAny) {
        guard let promise else { return }
        context.write(wrap(.byteBuffer(context.channel.allocator.buffer(capacity: 0))), promise: promise)
    }
}
