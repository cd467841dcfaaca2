import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// `--head-path-decoders`' decoders: `HeadPathDecoder` for NIO's head types,
/// each as a type of its own, as pinproxy installs it
/// (`UpstreamResponseHeadPathDecoder`). NIO's `ByteToMessageHandler` calls
/// its decoder through the protocol's witness, and a generic decoder's
/// witness is its unspecialized code: the seventh pass measured that.
struct FloorRequestHeadPathDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private var decoder: HeadPathDecoder<HTTPRequestHead>

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

/// The upstream leg's, likewise.
struct FloorResponseHeadPathDecoder: WriteObservingByteToMessageDecoder {
    typealias InboundOut = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart

    private var decoder: HeadPathDecoder<HTTPResponseHead>

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
