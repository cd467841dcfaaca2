import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The upstream HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`
/// for `UpstreamResponseHead`, as a type of its own so that NIO runs it
/// specialized (`HeadPathDecoding` says why). It learns of the requests
/// sent from `sent`, which the connection tells as it writes each head
/// (`UpstreamConnection.write`), so that the answer to a HEAD or a CONNECT
/// is read without a body. Not a write-observing decoder: that made NIO's
/// `ByteToMessageHandler` an outbound handler that every part of every
/// request passed through, copying this decoder to look at it (issue 33).
struct UpstreamResponseHeadPathDecoder: HeadPathDecoding {
    var decoder: HeadPathDecoder<UpstreamResponseHead>
    let sent: SentRequests

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        decoder.take(sent)
        return try decoder.decode(context: context, buffer: &buffer)
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        decoder.take(sent)
        return try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
