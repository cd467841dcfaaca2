import NIOCore
import NIOHTTP1
import PinproxyHTTP1

/// How a head is checked and written by the head path's writers: the bytes
/// NIO's encoders write, and the checks NIO's outbound validators make, in
/// one pass over the fields (`HeadWriterDifferential` compares the two on
/// the same parts).
enum HeadBytes {
    /// Writes `fields` as NIO's encoders do (`name: value` and CRLF each),
    /// after checking each as NIO's validators do: a name of token bytes, a
    /// value without control bytes but the tab. Fields `skip` names are left
    /// out (the framing fields a response cannot carry), though checked
    /// first, as NIO's validator checks them before its encoder drops them.
    /// False, with `buffer` half written, when a field may not be sent.
    static func writeFields(_ fields: HTTPHeaders, into buffer: inout ByteBuffer, skip: SkippedFields = .none) -> Bool {
        for (name, value) in fields {
            guard writeField(name, value, into: &buffer, skipped: skip != .none && skip.drops(name)) else { return false }
        }
        return true
    }

    /// One field, checked and copied in one pass over its bytes: written
    /// piece by piece, each piece would pay the buffer's checks, and a
    /// check of its own would be a second pass. `skipped`: checked, not
    /// written.
    static func writeField(_ name: String, _ value: String, into buffer: inout ByteBuffer, skipped: Bool) -> Bool {
        var name = name, value = value
        return name.withUTF8 { name in
            value.withUTF8 { value in
                writeField(UnsafeRawBufferPointer(name), UnsafeRawBufferPointer(value), into: &buffer, skipped: skipped)
            }
        }
    }

    /// The same, for a field's bytes as they came (a forwarded head's).
    static func writeField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, into buffer: inout ByteBuffer,
                           skipped: Bool) -> Bool {
        var sendable = true
        let length = name.count + value.count + 4
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { room in
            var at = 0
            func copy(_ bytes: UnsafeRawBufferPointer, _ allowed: (UInt8) -> Bool) {
                for byte in bytes {
                    sendable = sendable && allowed(byte)
                    room[at] = byte
                    at += 1
                }
            }
            copy(name, isTokenByte)
            room[at] = UInt8(ascii: ":")
            room[at + 1] = UInt8(ascii: " ")
            at += 2
            copy(value, isFieldValueByte)
            room[at] = UInt8(ascii: "\r")
            room[at + 1] = UInt8(ascii: "\n")
            return sendable && !skipped ? length : 0
        }
        return sendable
    }

    /// Whether every field may be sent, for fields not written (trailers of
    /// a message that is not chunked, which NIO's validators check too).
    static func areWritable(_ fields: HTTPHeaders) -> Bool {
        fields.allSatisfy { isToken($0.name) && isFieldValue($0.value) }
    }

    /// The framing fields a writer leaves out of a head.
    enum SkippedFields: Equatable {
        case none
        case transferEncoding
        case framing

        func drops(_ name: String) -> Bool {
            var name = name
            return name.withUTF8 { drops(UnsafeRawBufferPointer($0)) }
        }

        func drops(_ name: UnsafeRawBufferPointer) -> Bool {
            switch self {
            case .none: return false
            case .transferEncoding: return FieldNames.equal(name, "transfer-encoding")
            case .framing: return FieldNames.equal(name, "transfer-encoding") || FieldNames.equal(name, "content-length")
            }
        }
    }

    /// `HTTP/1.1`, or the version spelt out.
    static func writeVersion(_ version: HTTPVersion, into buffer: inout ByteBuffer) {
        switch (version.major, version.minor) {
        case (1, 1): buffer.writeStaticString("HTTP/1.1")
        case (1, 0): buffer.writeStaticString("HTTP/1.0")
        default:
            buffer.writeStaticString("HTTP/")
            buffer.writeString(String(version.major))
            buffer.writeStaticString(".")
            buffer.writeString(String(version.minor))
        }
    }

    /// A chunk's size line, as NIO's encoders write it (lowercase hex).
    static func chunkSizeLine(_ count: Int, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 32)
        buffer.writeString(String(count, radix: 16))
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// A chunked message's last chunk and trailers; nil when a trailer may
    /// not be sent.
    static func lastChunk(_ trailers: HTTPHeaders?, allocator: ByteBufferAllocator) -> ByteBuffer? {
        guard let trailers else {
            var buffer = allocator.buffer(capacity: 8)
            buffer.writeStaticString("0\r\n\r\n")
            return buffer
        }
        var buffer = allocator.buffer(capacity: 256)
        buffer.writeStaticString("0\r\n")
        guard writeFields(trailers, into: &buffer) else { return nil }
        buffer.writeStaticString("\r\n")
        return buffer
    }

    /// Whether `text` is made of token bytes (RFC 9110 §5.6.2): a field
    /// name's or a method's. Empty passes, as it does NIO's validators.
    static func isToken(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { $0.allSatisfy(isTokenByte) }
    }

    /// Whether `text` may be a field's value (or a reason phrase, which
    /// allows the same bytes).
    static func isFieldValue(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { $0.allSatisfy(isFieldValueByte) }
    }

    /// Whether a request target is made only of the bytes RFC 9112 lets
    /// one hold on the wire, as NIO's request validator checks.
    static func isTarget(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isTarget(UnsafeRawBufferPointer($0)) }
    }

    /// The same, for a target's bytes as they came (a forwarded head's).
    static func isTarget(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.allSatisfy { byte in contains(byte, low: targetLow, high: targetHigh) }
    }

    /// tchar: `!#$%&'*+-.^_`|~`, digits and letters (the head parser's
    /// `ByteClass.token`, which `HeadBytesTests` compares it with). Masks,
    /// not the parser's table: a table in another module is reached through
    /// its lazy global's accessor, a `swift_once` for every byte written
    /// (issue 33: 0.5% of a keep-alive request).
    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool { contains(byte, low: tokenLow, high: tokenHigh) }

    /// Anything but a control byte; the tab is allowed, and so are bytes
    /// past ASCII, as NIO lets them through (the head parser's
    /// `ByteClass.text`, likewise).
    @inline(__always)
    static func isFieldValueByte(_ byte: UInt8) -> Bool { byte >= 0x80 || contains(byte, low: textLow, high: textHigh) }

    private static let tokenLow: UInt64 = 0x03FF_6CFA_0000_0000
    private static let tokenHigh: UInt64 = 0x57FF_FFFF_C7FF_FFFE
    private static let textLow: UInt64 = 0xFFFF_FFFF_0000_0200
    private static let textHigh: UInt64 = 0x7FFF_FFFF_FFFF_FFFF

    /// unreserved, gen-delims, sub-delims and `%` (RFC 3986), what NIO's
    /// request validator lets a target hold: stricter than the head
    /// parser's visible ASCII, so a class of its own, as two 64-bit masks.
    private static let targetLow: UInt64 = 0xAFFF_FFFA_0000_0000
    private static let targetHigh: UInt64 = 0x47FF_FFFE_AFFF_FFFF

    @inline(__always)
    private static func contains(_ byte: UInt8, low: UInt64, high: UInt64) -> Bool {
        switch byte {
        case 0..<64: return low & (1 << UInt64(byte)) != 0
        case 64..<128: return high & (1 << UInt64(byte - 64)) != 0
        default: return false
        }
    }
}

extension HTTPMethod {
    /// Whether NIO's request validator lets the method out: every named
    /// method, and a raw one that is a token.
    var isWritable: Bool {
        if case .RAW(let value) = self { return HeadBytes.isToken(value) }
        return true
    }
}

extension HTTPResponseStatus {
    /// Whether NIO's response validator lets the status out: every named
    /// status, and a custom one whose reason phrase holds no control byte.
    var isWritable: Bool {
        // RFC 9112's reason-phrase allows the bytes a field's value does.
        if case .custom(_, let reason) = self { return HeadBytes.isFieldValue(reason) }
        return true
    }
}
