import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// `--head-path-decoders`' decoders: `HeadPathDecoder` for NIO's head types,
/// each a type of its own, as pinproxy installs it (`HeadPathDecoding` says
/// why; the seventh pass measured the generic decoder, unspecialized).
struct FloorRequestHeadPathDecoder: HeadPathDecoding {
    var decoder: HeadPathDecoder<HTTPRequestHead>
}

/// The upstream leg's, watching the requests go out as NIO's decoder does
/// (the floor keeps NIO's shape; pinproxy's is told, `SentRequests`).
struct FloorResponseHeadPathDecoder: HeadPathDecoding, WriteObservingByteToMessageDecoder {
    typealias OutboundIn = HTTPClientRequestPart

    var decoder: HeadPathDecoder<HTTPResponseHead>

    mutating func write(data: HTTPClientRequestPart) {
        decoder.write(data: data)
    }
}
