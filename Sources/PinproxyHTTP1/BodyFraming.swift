/// How the body after a head is delimited (RFC 9112 §6), decided from the
/// head's bytes, with pinproxy's rules for requests (docs/contract.md):
/// stricter than NIO's decoder, never looser, so a body is never read to a
/// different length than NIO would read it.
public enum BodyFraming: Equatable, Sendable {
    /// No body follows the head.
    case none
    /// Exactly this many bytes.
    case length(UInt64)
    /// Chunked transfer coding.
    case chunked
    /// Everything until the connection closes: a response only.
    case untilClose
    /// The connection stops carrying HTTP/1 after the head (a CONNECT
    /// request, a `101`): what follows is not a message.
    case switchesProtocol
}

/// Why a head's framing was refused: a head two parsers could delimit
/// differently, or one NIO's decoder refuses.
public struct FramingRefusal: Error, Equatable, Sendable {
    public var reason: String
    init(_ reason: String) { self.reason = reason }
}

extension ParsedHead {
    /// More `Connection` tokens than any real client sends.
    public static let maxConnectionTokens = 32

    /// A request's framing. Refused: both `Content-Length` and
    /// `Transfer-Encoding`; more than one length; a length that is not
    /// digits only; a transfer coding other than exactly `chunked`, or one in
    /// an HTTP/1.0 request; a `Connection` field that names a framing field
    /// or holds more than `maxConnectionTokens` tokens.
    public func requestFraming(in bytes: UnsafeRawBufferPointer) -> Result<BodyFraming, FramingRefusal> {
        let fields: FramingFields, length: UInt64?
        switch framingFields(in: bytes) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): (fields, length) = found
        }
        // A CONNECT leaves HTTP/1 at its head. An upgrade request's body is
        // read first, as NIO's decoder reads it (`ConnectionOptions.asksUpgrade`).
        if method(in: bytes, is: "CONNECT") { return .success(.switchesProtocol) }
        if let length { return .success(.length(length)) }
        if fields.encodingCount > 0 {
            guard fields.encodingCount == 1, fields.lastEncodingIsChunked, fields.encodingTokens == 1 else {
                return .failure(.init("Transfer-Encoding must be exactly \"chunked\""))
            }
            guard minorVersion >= 1 else { return .failure(.init("Transfer-Encoding in an HTTP/1.0 request")) }
            return .success(.chunked)
        }
        return .success(.none)
    }

    /// A response's framing, given whether its request was HEAD (or CONNECT,
    /// whose answer has no body either). Refused: both framing fields, more
    /// than one length, a length that is not digits only.
    public func responseFraming(in bytes: UnsafeRawBufferPointer, requestHadNoBody headOrConnect: Bool) -> Result<BodyFraming, FramingRefusal> {
        let fields: FramingFields, length: UInt64?
        switch framingFields(in: bytes) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): (fields, length) = found
        }
        if status == 101 { return .success(.switchesProtocol) }
        if headOrConnect || status < 200 || status == 204 || status == 304 { return .success(.none) }
        if let length { return .success(.length(length)) }
        if fields.encodingCount > 0 { return .success(fields.lastEncodingIsChunked ? .chunked : .untilClose) }
        return .success(.untilClose)
    }

    /// The framing fields, refused when both kinds are present, or when a
    /// length is not one: NIO's decoder reads a length as its field arrives,
    /// so a bad one is refused whatever the message does next.
    private func framingFields(in bytes: UnsafeRawBufferPointer) -> Result<(FramingFields, UInt64?), FramingRefusal> {
        var fields = FramingFields()
        if let refusal = fields.collect(self, in: bytes) { return .failure(refusal) }
        if fields.lengthCount > 0 && fields.encodingCount > 0 {
            return .failure(.init("both Content-Length and Transfer-Encoding are present"))
        }
        guard fields.lengthCount > 0 else { return .success((fields, nil)) }
        return fields.length().map { (fields, $0) }
    }

    /// Whether the request's method is `name`.
    public func method(in bytes: UnsafeRawBufferPointer, is name: StaticString) -> Bool {
        guard method.count == name.utf8CodeUnitCount else { return false }
        return method.bytes(in: bytes)
            .elementsEqual(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }
}

/// The framing fields of one head, gathered in one pass over its fields.
private struct FramingFields {
    var lengthCount = 0
    var lengthValue = ByteSpan.empty
    var encodingCount = 0
    var encodingTokens = 0
    var lastEncodingIsChunked = false
    var bytes = UnsafeRawBufferPointer(start: nil, count: 0)

    mutating func collect(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) -> FramingRefusal? {
        self.bytes = bytes
        var connectionTokens = 0
        for field in head.fields {
            switch field.name.count {
            case 14 where FieldNames.equal(bytes, field.name, "content-length"):
                lengthCount += 1
                lengthValue = field.value
                if FieldNames.holdsTab(bytes, field) { return .init("a tab in Content-Length") }
            case 17 where FieldNames.equal(bytes, field.name, "transfer-encoding"):
                encodingCount += 1
                if FieldNames.holdsTab(bytes, field) { return .init("a tab in Transfer-Encoding") }
                // Every element counts, an empty one too: `chunked,` is not `chunked`.
                encodingTokens += 1 + field.value.bytes(in: bytes).reduce(0) { $1 == 0x2C ? $0 + 1 : $0 }
                var last = ByteSpan.empty
                FieldNames.forEachToken(bytes, field.value) { last = $0 }
                lastEncodingIsChunked = FieldNames.equal(bytes, last, "chunked")
            case 10 where FieldNames.equal(bytes, field.name, "connection"):
                var refusal: FramingRefusal?
                FieldNames.forEachToken(bytes, field.value) { token in
                    connectionTokens += 1
                    if FieldNames.equal(bytes, token, "content-length") || FieldNames.equal(bytes, token, "transfer-encoding") {
                        refusal = refusal ?? .init("Connection names a field that frames the message")
                    }
                }
                if let refusal { return refusal }
                if connectionTokens > ParsedHead.maxConnectionTokens {
                    return .init("more than \(ParsedHead.maxConnectionTokens) Connection tokens")
                }
            default:
                break
            }
        }
        return nil
    }

    /// The one `Content-Length`, digits only.
    func length() -> Result<UInt64, FramingRefusal> {
        guard lengthCount == 1 else { return .failure(.init("more than one Content-Length")) }
        let digits = lengthValue.bytes(in: bytes)
        guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return .failure(.init("Content-Length is not a number"))
        }
        return .success(digits.reduce(0) { $0 * 10 + UInt64($1 - 0x30) })
    }
}

/// Field names and list tokens compared without ASCII case, in place.
public enum FieldNames {
    static func equal(_ bytes: UnsafeRawBufferPointer, _ span: ByteSpan, _ lowercase: StaticString) -> Bool {
        equal(span.bytes(in: bytes), lowercase)
    }

    /// Whether `bytes` spell `lowercase` but for ASCII letters' case.
    public static func equal(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for offset in 0..<bytes.count where folded(bytes[offset]) != expected[offset] { return false }
        return true
    }

    /// Whether two names' bytes are the same but for ASCII letters' case
    /// (a name one field lists, such as a `Connection` token, against another's).
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        for offset in 0..<a.count where folded(a[offset]) != folded(b[offset]) { return false }
        return true
    }

    /// `byte` with an ASCII capital made lowercase.
    @inlinable
    public static func folded(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }

    /// Whether a tab stands anywhere after the field's colon: NIO refuses
    /// one beside a length's digits or a transfer coding, so a framing
    /// field with a tab is refused whole.
    static func holdsTab(_ bytes: UnsafeRawBufferPointer, _ field: FieldSpan) -> Bool {
        var index = field.name.end + 1
        while bytes[index] != 0x0D {
            if bytes[index] == 0x09 { return true }
            index += 1
        }
        return false
    }

    /// Each comma-separated element of a list value, without its optional
    /// whitespace; empty elements are skipped (RFC 9110 §5.6.1).
    public static func forEachToken(_ bytes: UnsafeRawBufferPointer, _ value: ByteSpan, _ body: (ByteSpan) -> Void) {
        var start = value.start
        while start <= value.end {
            var end = start
            while end < value.end && bytes[end] != 0x2C { end += 1 }
            var first = start
            var last = end
            while first < last && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
            while last > first && (bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09) { last -= 1 }
            if last > first { body(ByteSpan(start: first, count: last - first)) }
            start = end + 1
        }
    }
}
