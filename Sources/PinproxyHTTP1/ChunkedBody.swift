/// Reads a chunked body (RFC 9112 §7.1) as it arrives, read by read, and
/// tells where each chunk's data lies and where the body ends, so the bytes
/// can be passed on as they are. Stricter than NIO's decoder (llhttp), never
/// looser: a chunk size is hex digits only, with no extension and no
/// whitespace; each line ends CR LF; the body ends with `0` CR LF CR LF, no
/// trailer fields. A body read here is one NIO reads to the same bytes
/// (`HTTP1Differential`, the `head` fuzz target).
public struct ChunkedBody: Sendable {
    /// Where the reader is in the body.
    enum State: Equatable, Sendable {
        /// In a chunk-size line: the size so far and how many digits it had.
        case size(UInt64, digits: Int)
        /// The size line's CR was read: LF next, then a chunk of this size
        /// (0: the last chunk, then the closing blank line).
        case sizeLineFeed(UInt64)
        /// In a chunk's data: so many bytes still to come.
        case data(UInt64)
        /// After a chunk's data: its CR, then its LF.
        case dataCarriageReturn
        case dataLineFeed
        /// After the last chunk: the blank line's CR, then its LF.
        case endCarriageReturn
        case endLineFeed
        /// The body has ended.
        case done
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

    private(set) var state = State.size(0, digits: 0)

    public init() {}

    public var isDone: Bool { state == .done }

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
                } else if byte == 0x0D, digits > 0 {
                    state = .sizeLineFeed(size)
                } else {
                    throw byte == 0x3B ? .extension : .badSize
                }
                index += 1
            case .sizeLineFeed(let size):
                guard byte == 0x0A else { throw .bareLineEnd }
                state = size == 0 ? .endCarriageReturn : .data(size)
                index += 1
            case .data(let remaining):
                let available = UInt64(bytes.count - index)
                let count = Int(min(remaining, available))
                data(ByteSpan(start: index, count: count))
                index += count
                state = remaining == UInt64(count) ? .dataCarriageReturn : .data(remaining - UInt64(count))
            case .dataCarriageReturn:
                guard byte == 0x0D else { throw .bareLineEnd }
                state = .dataLineFeed
                index += 1
            case .dataLineFeed:
                guard byte == 0x0A else { throw .bareLineEnd }
                state = .size(0, digits: 0)
                index += 1
            case .endCarriageReturn:
                guard byte == 0x0D else { throw .trailers }
                state = .endLineFeed
                index += 1
            case .endLineFeed:
                guard byte == 0x0A else { throw .bareLineEnd }
                state = .done
                return .ended(consumed: index + 1)
            case .done:
                return .ended(consumed: index)
            }
        }
        return state == .done ? .ended(consumed: index) : .needMore
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
    /// A size line that is not hex digits and CR LF.
    case badSize
    /// A size over 2^64.
    case sizeTooLarge
    /// A chunk extension (`;name=value`): NIO reads them, this does not.
    case `extension`
    /// A line that does not end CR LF where one must.
    case bareLineEnd
    /// Trailer fields after the last chunk: NIO reads them, this does not.
    case trailers
}
