import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The upstream HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`
/// for `UpstreamResponseHead`, as a type of its own. NIO's
/// `ByteToMessageHandler` calls its decoder through the protocol's witness;
/// for the generic `HeadPathDecoder<Head>` that witness is the unspecialized
/// code, which looked each part's type up and cast each `NIOAny` at run
/// time. This type's witnesses are its own, and the inlinable decoder is
/// specialized inside them (issue 33).
struct UpstreamResponseHeadPathDecoder: WriteObservingByteToMessageDecoder {
    typealias InboundOut = UpstreamResponsePart
    typealias OutboundIn = HTTPClientRequestPart

    private var decoder: HeadPathDecoder<UpstreamResponseHead>

    init(maxFieldBytes: Int, maxFieldCount: Int) {
        decoder = HeadPathDecoder(maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        try decoder.decode(context: context, buffer: &buffer)
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }

    mutating func write(data: HTTPClientRequestPart) {
        decoder.write(data: data)
    }
}
