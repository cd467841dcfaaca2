/// Where a piece of a head lies in the bytes it was parsed from: offsets from
/// the head's first byte, so that a head read once can be forwarded as bytes
/// and only the pieces a policy touches are ever made into strings.
public struct ByteSpan: Equatable, Hashable, Sendable {
    public var start: Int
    public var count: Int

    public init(start: Int, count: Int) {
        self.start = start
        self.count = count
    }

    public var end: Int { start + count }

    /// This span's bytes in `bytes`, the bytes its offsets count from.
    @inlinable
    public func bytes(in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    public static let empty = ByteSpan(start: 0, count: 0)
}

/// One field line: its name and its value, the value without the optional
/// whitespace around it.
public struct FieldSpan: Equatable, Sendable {
    public var name: ByteSpan
    public var value: ByteSpan
}

/// A message head that `HeadParser` accepted, as spans of the bytes it read.
public struct ParsedHead: Equatable, Sendable {
    /// The head's length in bytes, its closing blank line included: the
    /// message's body (if any) starts here.
    public var length: Int
    /// HTTP/1.`minorVersion` (0 or 1: no other version gets this far).
    public var minorVersion: Int
    /// A request's method and target; empty in a response.
    public var method: ByteSpan
    public var target: ByteSpan
    /// A response's status code and reason phrase; 0 and empty in a request.
    public var status: Int
    public var reason: ByteSpan
    /// The field lines, in the order they came.
    public var fields: [FieldSpan]
    /// The bytes the parser's limit counted (target, names, values), which
    /// the message's trailers count on from.
    public var countedBytes: Int = 0
}

/// Why a head was refused. Each is a head NIO's HTTP/1 decoder would also
/// refuse, or one this parser refuses more strictly than it does (see
/// `HeadParser`).
public enum HeadRefusal: Error, Equatable, Sendable {
    /// Not one of the methods NIO's decoder (llhttp) knows.
    case unknownMethod
    /// A byte a request target may not hold, or no target.
    case badTarget
    /// Not `HTTP/1.0` or `HTTP/1.1`.
    case badVersion
    /// Not three digits where the status code goes.
    case badStatus
    /// A byte a reason phrase may not hold.
    case badReason
    /// A field name that is empty or holds a byte that is not a token's
    /// (whitespace before the colon among them).
    case badFieldName
    /// A control character in a field value.
    case badFieldValue
    /// A line that starts with whitespace: an obsolete folded continuation.
    case foldedLine
    /// A CR not followed by LF, or an LF without its CR.
    case bareLineEnd
    /// More than the limit's bytes of target, names and values, or a head
    /// whose end was not found within its bound.
    case tooLarge
    /// More field lines than the limit.
    case tooManyFields
}

extension HeadRefusal: CustomStringConvertible {
    public var description: String {
        switch self {
        case .unknownMethod: return "a method NIO's decoder does not know"
        case .badTarget: return "a request target that is not origin, absolute, authority or asterisk form of visible ASCII"
        case .badVersion: return "a version other than HTTP/1.0 or HTTP/1.1"
        case .badStatus: return "a status code that is not three digits from 100"
        case .badReason: return "a control character in the reason phrase"
        case .badFieldName: return "a field name that is empty or not a token (whitespace before the colon among them)"
        case .badFieldValue: return "a control character in a field value"
        case .foldedLine: return "a folded field line"
        case .bareLineEnd: return "a line not ended by CR LF"
        case .tooLarge: return "a head larger than its limit"
        case .tooManyFields: return "more field lines than the limit"
        }
    }
}
