import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The app's HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`,
/// reading requests into NIO's parts as NIO's decoder does (compared on the
/// same bytes by `HeadDifferentialTests` and the `head` fuzz target), and
/// refusing all it refuses and some more (docs/contract.md §10). A type of
/// its own for the reason `UpstreamResponseHeadPathDecoder` is one: NIO's
/// `ByteToMessageHandler` calls its decoder through the protocol's witness,
/// and only a concrete type's witness runs the decoder specialized.
struct AppRequestHeadPathDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private var decoder: HeadPathDecoder<HTTPRequestHead>

    /// `maxFieldBytes`: the field names' and values' bytes, as NIO's
    /// `maxHeaderListSize` counts them (the whole head is checked against
    /// `max_header_bytes` when it is routed).
    init(maxFieldBytes: Int, maxFieldCount: Int) {
        decoder = HeadPathDecoder(maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount)
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        try decoder.decode(context: context, buffer: &buffer)
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
