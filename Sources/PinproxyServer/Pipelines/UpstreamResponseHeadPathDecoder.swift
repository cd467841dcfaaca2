import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The upstream HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`
/// for `UpstreamResponseHead`, as a type of its own so that NIO runs it
/// specialized (`HeadPathDecoding` says why). It watches the requests go
/// out, so that the answer to a HEAD or a CONNECT is read without a body.
struct UpstreamResponseHeadPathDecoder: HeadPathDecoding, WriteObservingByteToMessageDecoder {
    typealias OutboundIn = HTTPClientRequestPart

    var decoder: HeadPathDecoder<UpstreamResponseHead>
}
