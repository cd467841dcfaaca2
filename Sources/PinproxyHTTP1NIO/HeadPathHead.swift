import NIOCore
import NIOHTTP1
import PinproxyHTTP1

/// A head NIO's parts carry, made from a head the head path read: what lets
/// one `HeadPathDecoder` give requests on the app's side and responses on
/// the upstream's.
public protocol HeadPathHead: Equatable, Sendable {
    static var kind: HeadParser.Kind { get }
    /// The head in `bytes`, which start at its first byte.
    init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer)
    /// The head whose bytes are `bytes` (a slice of those read), its body
    /// framed as `framing`: what `HeadPathDecoder` makes. NIO's heads are
    /// made from the raw bytes; a head kept as bytes keeps the slice.
    init(_ head: ParsedHead, framing: BodyFraming, bytes: ByteBuffer)
}

extension HeadPathHead {
    public init(_ head: ParsedHead, framing: BodyFraming, bytes: ByteBuffer) {
        self = bytes.withUnsafeReadableBytes { Self(head, in: $0) }
    }
}

/// A response head the head path makes: the response decoder watches the
/// requests go out for one of these.
public protocol ResponseHeadPathHead: HeadPathHead {}

extension ResponseHeadBytes: ResponseHeadPathHead {
    public static var kind: HeadParser.Kind { .response }

    /// A copy of the bytes, for a head made from bytes it cannot keep.
    public convenience init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        let own = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<head.length]))
        let framing = (try? head.responseFraming(in: bytes, requestHadNoBody: false).get()) ?? .untilClose
        self.init(head, framing: framing, bytes: own)
    }
}

extension HTTPRequestHead: HeadPathHead {
    public static var kind: HeadParser.Kind { .request }

    public init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        self.init(version: HTTPVersion(major: 1, minor: head.minorVersion),
                  method: HTTPMethod(rawValue: head.method.text(in: bytes)),
                  uri: head.target.text(in: bytes),
                  headers: HTTPHeaders(fieldsOf: head, in: bytes))
    }
}

extension HTTPResponseHead: ResponseHeadPathHead {
    public static var kind: HeadParser.Kind { .response }

    /// NIO's decoder keeps the status code and drops the reason phrase; so
    /// does this.
    public init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        self.init(version: HTTPVersion(major: 1, minor: head.minorVersion),
                  status: HTTPResponseStatus(statusCode: head.status),
                  headers: HTTPHeaders(fieldsOf: head, in: bytes))
    }
}

extension HTTPHeaders {
    init(fieldsOf head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
        self.init(head.fields.map { ($0.name.text(in: bytes), $0.value.text(in: bytes)) })
    }
}

extension ByteSpan {
    /// The span's bytes as a string (UTF-8, as NIO's decoder makes its fields).
    public func text(in bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: self.bytes(in: bytes), as: UTF8.self)
    }
}
