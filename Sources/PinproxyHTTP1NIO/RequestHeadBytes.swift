import NIOCore
import NIOHTTP1
import PinproxyHTTP1

/// An app's request head as it came: its bytes, and where the head path
/// found its pieces in them, as `ResponseHeadBytes` is an upstream's answer.
/// A proxy that forwards it copies the fields it keeps from these bytes
/// (`RequestWriter.writeForwarded`); only what it decides on is read, and no
/// `HTTPHeaders` is made for the rest.
///
/// A class, for `ResponseHeadBytes`' reason: one reference fits a part in
/// `NIOAny`'s inline room, its spans would not.
public final class RequestHeadBytes: Equatable, Sendable {
    /// The head's bytes, from its first byte to its blank line: a slice of
    /// the bytes read, not a copy.
    public let bytes: ByteBuffer
    /// Its pieces, as spans of `bytes`.
    public let parsed: ParsedHead
    /// How its body is framed, as the head path read it.
    public let framing: BodyFraming
    /// Its method and target, which every request's exchange reads (the
    /// writer that answers it, the access line), made once.
    public let method: HTTPMethod
    public let target: String

    public init(_ parsed: ParsedHead, framing: BodyFraming, bytes: ByteBuffer) {
        self.parsed = parsed
        self.framing = framing
        self.bytes = bytes
        (method, target) = bytes.withUnsafeReadableBytes {
            (HTTPMethod(rawValue: parsed.method.text(in: $0)), parsed.target.text(in: $0))
        }
    }

    /// A copy of the head in `bytes`, for a head made from bytes it cannot keep.
    public convenience init(_ parsed: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        let own = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<parsed.length]))
        let framing = (try? parsed.requestFraming(in: bytes).get()) ?? .none
        self.init(parsed, framing: framing, bytes: own)
    }

    /// HTTP/1.0 or HTTP/1.1: the head path reads no other.
    public var version: HTTPVersion { HTTPVersion(major: 1, minor: parsed.minorVersion) }

    /// Whether the app asked to keep its connection after this request, as
    /// NIO's `HTTPRequestHead.isKeepAlive` reads a head: a `close` token
    /// closes; `keep-alive` keeps, but a second token of either kind after
    /// it is taken as close; with neither, HTTP/1.1 keeps. (The head path's
    /// own `persists`, which decides whether more requests are read, takes
    /// two `keep-alive` tokens as keeping; the exchange keeps NIO's reading,
    /// as it did when it was given NIO's heads.)
    public var isKeepAlive: Bool {
        bytes.withUnsafeReadableBytes { bytes in
            enum Said { case nothing, keepAlive, close }
            var said = Said.nothing
            for field in parsed.fields where FieldNames.equal(field.name.bytes(in: bytes), "connection") {
                FieldNames.forEachToken(bytes, field.value) { token in
                    let token = token.bytes(in: bytes)
                    if FieldNames.equal(token, "close") {
                        said = .close
                    } else if FieldNames.equal(token, "keep-alive") {
                        said = said == .nothing ? .keepAlive : .close
                    }
                }
            }
            switch said {
            case .close: return false
            case .keepAlive: return true
            case .nothing: return parsed.minorVersion >= 1
            }
        }
    }

    /// The head NIO's decoder would have handed on for the same bytes, for
    /// whoever needs one whole.
    public var head: HTTPRequestHead {
        bytes.withUnsafeReadableBytes { HTTPRequestHead(parsed, in: $0) }
    }

    public static func == (left: RequestHeadBytes, right: RequestHeadBytes) -> Bool {
        left.bytes == right.bytes && left.parsed == right.parsed && left.framing == right.framing
    }
}
