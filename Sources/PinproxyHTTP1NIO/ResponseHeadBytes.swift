import NIOCore
import NIOHTTP1
import PinproxyHTTP1

/// An upstream's response head as it came: its bytes, and where the head
/// path found its pieces in them. A proxy that forwards it copies its fields
/// from these bytes (`ResponseWriter.writeForwarded`); only what it decides
/// on is read, and no `HTTPHeaders` or strings are made for the rest.
///
/// A class, not a struct: its spans are some 120 bytes, and a part that
/// carries them inline no longer fits `NIOAny`'s inline room, so every
/// part of the response (head, each body slice, end) was boxed on its way
/// between handlers. One object for the head costs one allocation instead.
public final class ResponseHeadBytes: Equatable, Sendable {
    /// The head's bytes, from its first byte to its blank line: a slice of
    /// the bytes read, not a copy.
    public let bytes: ByteBuffer
    /// Its pieces, as spans of `bytes`.
    public let parsed: ParsedHead
    /// How its body is framed, as the head path read it.
    public let framing: BodyFraming

    public init(_ parsed: ParsedHead, framing: BodyFraming, bytes: ByteBuffer) {
        self.parsed = parsed
        self.framing = framing
        self.bytes = bytes
    }

    public var statusCode: Int { parsed.status }

    /// HTTP/1.0 or HTTP/1.1: the head path reads no other.
    public var version: HTTPVersion { HTTPVersion(major: 1, minor: parsed.minorVersion) }

    /// Whether the connection carries another answer after this one (its
    /// version and `Connection` fields, as NIO's `isKeepAlive` reads them).
    public var persists: Bool {
        bytes.withUnsafeReadableBytes { parsed.connectionOptions(in: $0).persists }
    }

    /// The first value of the field named `lowercaseName`, if it has one.
    public func first(_ lowercaseName: StaticString) -> String? {
        bytes.withUnsafeReadableBytes { bytes in
            parsed.fields.first { FieldNames.equal($0.name.bytes(in: bytes), lowercaseName) }
                .map { $0.value.text(in: bytes) }
        }
    }

    /// The head NIO's decoder would have handed on for the same bytes, for
    /// whoever needs one (an HTTP/2 app's stream, a `101`).
    public var head: HTTPResponseHead {
        bytes.withUnsafeReadableBytes { HTTPResponseHead(parsed, in: $0) }
    }

    public static func == (left: ResponseHeadBytes, right: ResponseHeadBytes) -> Bool {
        left.bytes == right.bytes && left.parsed == right.parsed && left.framing == right.framing
    }
}
