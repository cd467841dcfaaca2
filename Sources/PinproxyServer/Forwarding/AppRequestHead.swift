import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO

/// An app's request head as the exchange takes it: the bytes the head path
/// read on an HTTP/1.1 connection, routed and forwarded as those bytes
/// edited (`RequestRouter.routeForwarded`, `ForwardedRequestHead`); the
/// header block an HTTP/2 stream brought, routed and forwarded as that block
/// edited (`RequestRouter.routeBlock`, `ForwardedRequestBlock`); or a head
/// made whole (a transparent connection's rewritten one, or one the common
/// path does not take).
enum AppRequestHead: HeadPathHead {
    case bytes(RequestHeadBytes)
    case block(AppRequestBlock)
    case whole(HTTPRequestHead)

    static var kind: HeadParser.Kind { .request }

    /// What the app's HTTP/1.1 decoder makes: the head path's bytes, kept.
    init(_ head: ParsedHead, framing: BodyFraming, bytes: ByteBuffer) {
        self = .bytes(RequestHeadBytes(head, framing: framing, bytes: bytes))
    }

    init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        self = .bytes(RequestHeadBytes(head, in: bytes))
    }

    /// NIO's head for the same request, made from the bytes if need be.
    var whole: HTTPRequestHead {
        switch self {
        case .bytes(let bytes): return bytes.head
        case .block(let block): return block.whole
        case .whole(let head): return head
        }
    }

    var method: HTTPMethod {
        switch self {
        case .bytes(let bytes): return bytes.method
        case .block(let block): return block.method
        case .whole(let head): return head.method
        }
    }

    var uri: String {
        switch self {
        case .bytes(let bytes): return bytes.target
        case .block(let block): return block.path
        case .whole(let head): return head.uri
        }
    }

    /// Whether the app's connection carries another request after this one.
    var isKeepAlive: Bool {
        switch self {
        case .bytes(let bytes): return bytes.isKeepAlive
        case .block(let block): return block.isKeepAlive
        case .whole(let head): return head.isKeepAlive
        }
    }
}

/// A request's part as the exchange takes it.
typealias AppRequestPart = HTTPPart<AppRequestHead, ByteBuffer>

extension AppRequestPart {
    /// NIO's part, the head made whole (for the handler after the exchange's).
    var whole: HTTPServerRequestPart {
        switch self {
        case .head(let head): return .head(head.whole)
        case .body(let body): return .body(body)
        case .end(let trailers): return .end(trailers)
        }
    }
}
