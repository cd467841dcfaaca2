import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO

/// A response head as an upstream hands it to the exchange: the bytes an
/// HTTP/1.1 connection's head path read (`HeadPathDecoder` makes it), or
/// the header block an HTTP/2 stream's adapter read. The exchange reads the
/// status and the connection's persistence from either.
enum UpstreamResponseHead: ResponseHeadPathHead {
    case bytes(ResponseHeadBytes)
    case block(HTTP2ResponseBlock)

    static var kind: HeadParser.Kind { .response }

    init(_ head: ParsedHead, framing: BodyFraming, bytes: ByteBuffer) {
        self = .bytes(ResponseHeadBytes(head, framing: framing, bytes: bytes))
    }

    init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        self = .bytes(ResponseHeadBytes(head, in: bytes))
    }

    var statusCode: Int {
        switch self {
        case .bytes(let head): return head.statusCode
        case .block(let head): return head.status
        }
    }

    /// Whether the upstream keeps its connection open after this answer: as
    /// NIO's decoder says, not when the body runs to the close. (NIO also
    /// reads a `Proxy-Connection: keep-alive` as `Connection`'s, which lets
    /// an HTTP/1.0 upstream's connection be reused; a server does not send
    /// that field, and the head path reads only `Connection`.) An HTTP/2
    /// stream's connection goes on; the stream itself ends with its response.
    var isKeepAlive: Bool {
        switch self {
        case .bytes(let head): return head.persists && head.framing != .untilClose
        case .block: return true
        }
    }

    /// The first value of a field (a 429's `Retry-After`).
    func first(_ lowercaseName: StaticString) -> String? {
        switch self {
        case .bytes(let head): return head.first(lowercaseName)
        case .block(let head): return head.first(lowercaseName)
        }
    }

    /// As NIO's head: for what reads a head whole (a `101`, the answers
    /// pinproxy collects for itself).
    var head: HTTPResponseHead {
        switch self {
        case .bytes(let head): return head.head
        case .block(let head): return head.head
        }
    }
}

/// An upstream connection's response parts, whichever protocol it speaks.
typealias UpstreamResponsePart = HTTPPart<UpstreamResponseHead, ByteBuffer>

/// The head the app is sent, as the exchange decided it.
enum ClientResponseHead {
    /// A head made whole (an HTTP/2 upstream's, a `101`'s).
    case head(HTTPResponseHead)
    /// The upstream's own bytes, edited on the way out as
    /// `MessageRules.clientHead` edits a head: its hop-by-hop fields left
    /// out, `Via` added, and `Connection: close` when `closing`.
    case forwarded(ResponseHeadBytes, closing: Bool)
    /// An HTTP/2 upstream's block, which an HTTP/2 app's stream is sent
    /// edited as `clientHead` edits a head (`HTTP2ResponseBlock.forwarded`).
    case block(HTTP2ResponseBlock, closing: Bool)

    /// The same head made whole: what an app is sent in the other protocol.
    var whole: HTTPResponseHead {
        switch self {
        case .head(let head): return head
        case .forwarded(let head, let closing): return MessageRules.clientHead(from: head.head, closing: closing)
        case .block(let head, let closing): return MessageRules.clientHead(from: head.head, closing: closing)
        }
    }
}
