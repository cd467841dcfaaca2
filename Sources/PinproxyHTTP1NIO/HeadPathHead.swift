import NIOHTTP1
import PinproxyHTTP1

/// A head NIO's parts carry, made from a head the head path read: what lets
/// one `HeadPathDecoder` give requests on the app's side and responses on
/// the upstream's.
public protocol HeadPathHead: Equatable, Sendable {
    static var kind: HeadParser.Kind { get }
    /// The head in `bytes`, which start at its first byte.
    init(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer)
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

extension HTTPResponseHead: HeadPathHead {
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
    func text(in bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }
}
