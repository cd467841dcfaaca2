/// Reads a chunked body (RFC 9112 §7.1) as it arrives, read by read, and
/// tells where each chunk's data lies and where the body ends, so the bytes
/// can be passed on as they are. Stricter than NIO's decoder (llhttp), never
/// looser: a chunk size is hex digits with no whitespace; an extension is
/// `;name` or `;name=value` (a token, or a quoted string without escapes)
/// with no whitespace; a trailer field is a head's field line; every line
/// ends CR LF; a size line and the trailer section are bounded. A body read
/// here is one NIO reads to the same bytes (`HTTP1Differential`, the `head`
/// fuzz target).
public struct ChunkedBody: Sendable {
    /// Where the reader is in the body.
    enum State: Equatable, Sendable {
        /// In a chunk-size line's digits: the size so far and how many digits.
        case size(UInt64, digits: Int)
        /// In a chunk extension of a chunk of this size.
        case chunkExtension(UInt64, ExtensionPart)
        /// The size line's CR was read: LF next, then a chunk of this size
        /// (0: the last chunk, then the trailer section).
        case sizeLineFeed(UInt64)
        /// In a chunk's data: so many bytes still to come.
        case data(UInt64)
        /// After a chunk's data: its CR, then its LF.
        case dataCarriageReturn
        case dataLineFeed
        /// After the last chunk: at the start of a trailer line (or of the
        /// blank line that ends the body).
        case trailerLineStart
        /// In a trailer field's name, before its value (optional whitespace),
        /// then in its value.
        case trailerName
        case trailerValueStart
        case trailerValue
        /// A trailer line's CR was read.
        case trailerLineFeed
        /// The blank line's CR was read.
        case endLineFeed
        /// The body has ended.
        case done
    }

    /// Where in `;name=value` the reader is.
    enum ExtensionPart: Equatable, Sendable {
        case nameStart
        case name
        case valueStart
        case tokenValue
        case quotedValue
        case afterQuotedValue
    }

    public enum Outcome: Equatable, Sendable {
        /// Every byte given was read; the body goes on.
        case needMore
        /// The body ended after this many of the bytes given: what follows
        /// is the next message.
        case ended(consumed: Int)
    }

    /// The most hex digits a size may have: a size that needs more is over
    /// 2^64, which NIO refuses too.
    static let maxSizeDigits = 16
    /// The most bytes a size line's extensions may take.
    public static let maxExtensionBytes = 1024
    /// The most bytes the trailer section may take.
    public static let maxTrailerBytes = 8192

    private(set) var state = State.size(0, digits: 0)
    /// Bytes of the current size line's extensions.
    private var lineBytes = 0
    /// What is left of the head's limits for the trailer fields: NIO counts
    /// a message's trailers with its head (`HeadParser`'s limits).
    private var fieldsLeft: Int
    private var countedBytesLeft: Int
    /// The trailer section's field lines as they came (each ends CR LF).
    private var trailerSection: [UInt8] = []
    /// Where in `trailerSection` the field being read starts.
    private var trailerNameStart = 0
    /// A request's: NIO's decoder refuses a `Transfer-Encoding` trailer in
    /// a request (in a response it reads one), and a `Content-Length`
    /// trailer in either.
    private let inRequest: Bool

    /// A body whose trailers have no limit but `maxTrailerBytes`.
    public init(inRequest: Bool = false) {
        fieldsLeft = .max
        countedBytesLeft = .max
        self.inRequest = inRequest
    }

    /// The body after `head`, read by `parser`: its trailers count against
    /// what the head left of the parser's limits.
    public init(after head: ParsedHead, limits parser: HeadParser) {
        fieldsLeft = parser.maxFieldCount - head.fields.count
        countedBytesLeft = parser.maxFieldBytes - head.countedBytes
        inRequest = parser.kind == .request
    }


    /// Reads `bytes`, the body's next bytes. `data` is called with each run
    /// of chunk data in them, as a span of `bytes`.
    public mutating func read(_ bytes: UnsafeRawBufferPointer, data: (ByteSpan) -> Void) throws(ChunkRefusal) -> Outcome {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .size(let size, let digits):
                if let digit = Self.hexValue(byte) {
                    guard digits < Self.maxSizeDigits else { throw .sizeTooLarge }
                    state = .size(size << 4 | UInt64(digit), digits: digits + 1)
                } else if digits > 0 && byte == 0x0D {
                    state = .sizeLineFeed(size)
                } else if digits > 0 && byte == 0x3B {
                    lineBytes = 0
                    state = .chunkExtension(size, .nameStart)
                } else {
                    throw .badSize
                }
            case .chunkExtension(let size, let part):
                lineBytes += 1
                guard lineBytes <= Self.maxExtensionBytes else { throw .extensionTooLong }
                state = .chunkExtension(size, try Self.extensionStep(part, byte))
                if byte == 0x0D, part != .quotedValue { state = .sizeLineFeed(size) }
            case .sizeLineFeed(let size):
                guard byte == 0x0A else { throw .bareLineEnd }
                state = size == 0 ? .trailerLineStart : .data(size)
                lineBytes = 0
            case .data(let remaining):
                let count = Int(min(remaining, UInt64(bytes.count - index)))
                data(ByteSpan(start: index, count: count))
                index += count
                state = remaining == UInt64(count) ? .dataCarriageReturn : .data(remaining - UInt64(count))
                continue
            case .dataCarriageReturn:
                guard byte == 0x0D else { throw .bareLineEnd }
                state = .dataLineFeed
            case .dataLineFeed:
                guard byte == 0x0A else { throw .bareLineEnd }
                state = .size(0, digits: 0)
            case .trailerLineStart:
                if byte == 0x0D {
                    state = .endLineFeed
                } else {
                    guard ByteClass.token[Int(byte)] else { throw .badTrailer }
                    fieldsLeft -= 1
                    guard fieldsLeft >= 0 else { throw .trailersTooLong }
                    trailerNameStart = trailerSection.count
                    try keepTrailerByte(byte, counted: true)
                    state = .trailerName
                }
            case .trailerName:
                if byte == 0x3A {
                    if framesTheMessage(trailerSection[trailerNameStart...]) { throw .framingTrailer }
                    state = .trailerValueStart
                } else {
                    guard ByteClass.token[Int(byte)] else { throw .badTrailer }
                }
                try keepTrailerByte(byte, counted: byte != 0x3A)
            case .trailerValueStart where byte == 0x20 || byte == 0x09:
                try keepTrailerByte(byte, counted: false)
            case .trailerValueStart, .trailerValue:
                if byte == 0x0D {
                    state = .trailerLineFeed
                } else {
                    guard ByteClass.text[Int(byte)] else { throw .badTrailer }
                    state = .trailerValue
                }
                // As NIO counts a value: from its first byte that is not
                // whitespace, its trailing whitespace included.
                try keepTrailerByte(byte, counted: byte != 0x0D)
            case .trailerLineFeed:
                guard byte == 0x0A else { throw .bareLineEnd }
                try keepTrailerByte(byte, counted: false)
                state = .trailerLineStart
            case .endLineFeed:
                guard byte == 0x0A else { throw .bareLineEnd }
                state = .done
                return .ended(consumed: index + 1)
            case .done:
                return .ended(consumed: index)
            }
            index += 1
        }
        return state == .done ? .ended(consumed: index) : .needMore
    }

    /// The trailer fields, names and values as they came (values without
    /// their optional whitespace).
    public var trailers: [(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)] {
        var fields: [(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)] = []
        var start = trailerSection.startIndex
        while start < trailerSection.endIndex {
            let lineEnd = trailerSection[start...].firstIndex(of: 0x0D)!
            let colon = trailerSection[start..<lineEnd].firstIndex(of: 0x3A)!
            var value = trailerSection[(colon + 1)..<lineEnd]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            fields.append((trailerSection[start..<colon], value))
            start = lineEnd + 2
        }
        return fields
    }

    /// Whether a trailer field's name is one NIO's decoder refuses in a
    /// trailer: a length (it reads one as the message's and finds the
    /// message chunked), or a request's transfer coding.
    private func framesTheMessage(_ name: ArraySlice<UInt8>) -> Bool {
        name.withUnsafeBytes { name in
            FieldNames.equal(name, "content-length") || (inRequest && FieldNames.equal(name, "transfer-encoding"))
        }
    }

    private mutating func keepTrailerByte(_ byte: UInt8, counted: Bool) throws(ChunkRefusal) {
        guard trailerSection.count < Self.maxTrailerBytes else { throw .trailersTooLong }
        if counted {
            countedBytesLeft -= 1
            guard countedBytesLeft >= 0 else { throw .trailersTooLong }
        }
        trailerSection.append(byte)
    }

    /// One byte of `;name[=value]`, up to the CR that ends the size line.
    private static func extensionStep(_ part: ExtensionPart, _ byte: UInt8) throws(ChunkRefusal) -> ExtensionPart {
        switch part {
        case .nameStart:
            guard ByteClass.token[Int(byte)] else { throw .badExtension }
            return .name
        case .name, .tokenValue, .afterQuotedValue:
            if byte == 0x3B { return .nameStart }
            if byte == 0x0D { return part }
            if part == .name && byte == 0x3D { return .valueStart }
            guard part != .afterQuotedValue, ByteClass.token[Int(byte)] else { throw .badExtension }
            return part
        case .valueStart:
            if byte == 0x22 { return .quotedValue }
            guard ByteClass.token[Int(byte)] else { throw .badExtension }
            return .tokenValue
        case .quotedValue:
            if byte == 0x22 { return .afterQuotedValue }
            // qdtext, with no escapes: a backslash is refused.
            guard ByteClass.text[Int(byte)], byte != 0x5C else { throw .badExtension }
            return .quotedValue
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }
}

/// Why a chunked body was refused.
public enum ChunkRefusal: Error, Equatable, Sendable {
    /// A size that is not hex digits, or whitespace around it.
    case badSize
    /// A size over 2^64.
    case sizeTooLarge
    /// A chunk extension that is not `;token` or `;token=token` or
    /// `;token="text"` (no whitespace, no escapes).
    case badExtension
    /// A size line's extensions over `maxExtensionBytes`.
    case extensionTooLong
    /// A line that does not end CR LF where one must.
    case bareLineEnd
    /// A trailer line that is not `name: value`.
    case badTrailer
    /// A trailer section over `maxTrailerBytes`, or trailers past what the
    /// head left of its limits.
    case trailersTooLong
    /// A `Content-Length` trailer, or a `Transfer-Encoding` one in a request.
    case framingTrailer
}

extension ChunkRefusal: CustomStringConvertible {
    public var description: String {
        switch self {
        case .badSize: return "a chunk size that is not hex digits"
        case .sizeTooLarge: return "a chunk size over 2^64"
        case .badExtension: return "a malformed chunk extension"
        case .extensionTooLong: return "chunk extensions over \(ChunkedBody.maxExtensionBytes) bytes"
        case .bareLineEnd: return "a chunk line not ended by CR LF"
        case .badTrailer: return "a malformed trailer field"
        case .trailersTooLong: return "trailers over their limit"
        case .framingTrailer: return "a trailer field that would frame the message"
        }
    }
}
