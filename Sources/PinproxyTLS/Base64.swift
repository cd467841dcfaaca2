/// RFC 4648 §4: the standard alphabet, padded with `=`. The form pins are
/// written in, and the form of the token-swap key.
///
/// Written here rather than through Foundation's `Data` so pins, hashed on
/// every upstream handshake, skip the round trips, and so decoding is strict
/// the same way everywhere.
public enum Base64 {
    public static func encode(_ bytes: [UInt8]) -> String {
        Base64Codec.standard.encode(bytes)
    }

    /// The bytes of `text`, or nil unless it is well formed: a multiple of
    /// four characters, `=` only as the last one or two, no whitespace.
    public static func decode(_ text: String) -> [UInt8]? {
        try? Base64Codec.standard.decode(text).get()
    }

    /// Why `decode` refuses `text`, or nil when it does not.
    public static func diagnose(_ text: String) -> Base64DecodingError? {
        Base64Codec.standard.decode(text).failure
    }
}

/// RFC 4648 §5: the URL- and filename-safe alphabet (`-` and `_`), without
/// padding. The form of sealed refresh tokens, PKCE verifiers and challenges.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Base64Codec.url.encode(bytes)
    }

    /// The bytes of `text`, or nil unless it is well formed: no `=`, no
    /// whitespace, a length that is not 1 more than a multiple of four.
    public static func decode(_ text: String) -> [UInt8]? {
        try? Base64Codec.url.decode(text).get()
    }

    /// Why `decode` refuses `text`, or nil when it does not.
    public static func diagnose(_ text: String) -> Base64DecodingError? {
        Base64Codec.url.decode(text).failure
    }
}

/// Why a text is not Base64. Offsets count UTF-8 bytes from 0; the text
/// itself is never repeated, as it may be a key or a token.
///
/// Bits the last character carries past the end of the data are ignored
/// (RFC 4648 §3.5 lets a decoder do either), as Foundation's decoder, which
/// pinproxy used before, ignores them: configs hold placeholder pins such as
/// `BBBB…B=` that only parse this way.
public enum Base64DecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A byte outside the alphabet (whitespace included), or `=` where no padding may be.
    case invalidCharacter(offset: Int)
    /// A length no encoder produces: not a multiple of 4 when padded, 1 more
    /// than a multiple of 4 when unpadded.
    case invalidLength(Int)

    public var description: String {
        switch self {
        case .invalidCharacter(let offset): return "not base64: unexpected character at offset \(offset)"
        case .invalidLength(let length): return "not base64: no encoding is \(length) characters long"
        }
    }
}

/// One alphabet and its padding rule; both public enums are thin names for the two instances.
struct Base64Codec: Sendable {
    private static let invalid: UInt8 = 0xFF

    static let standard = Base64Codec(alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", padded: true)
    static let url = Base64Codec(alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", padded: false)

    private let symbols: [UInt8]
    /// Byte → 6-bit value, `invalid` for bytes outside the alphabet.
    private let values: [UInt8]
    private let padded: Bool

    private init(alphabet: String, padded: Bool) {
        symbols = Array(alphabet.utf8)
        precondition(symbols.count == 64)
        var values = [UInt8](repeating: Self.invalid, count: 256)
        for (value, symbol) in symbols.enumerated() { values[Int(symbol)] = UInt8(value) }
        self.values = values
        self.padded = padded
    }

    func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [symbol(n >> 18), symbol(n >> 12), symbol(n >> 6), symbol(n)]
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let n = UInt32(bytes[i]) << 16
            out += [symbol(n >> 18), symbol(n >> 12)]
            if padded { out += [UInt8(ascii: "="), UInt8(ascii: "=")] }
        case 2:
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [symbol(n >> 18), symbol(n >> 12), symbol(n >> 6)]
            if padded { out.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    func decode(_ text: String) -> Result<[UInt8], Base64DecodingError> {
        var input = Array(text.utf8)
        let length = input.count
        if padded {
            guard length % 4 == 0 else { return .failure(.invalidLength(length)) }
            // At most two `=`, and only at the very end.
            var padding = 0
            while padding < 2, padding < input.count, input[input.count - 1 - padding] == UInt8(ascii: "=") { padding += 1 }
            input.removeLast(padding)
        } else if length % 4 == 1 {
            return .failure(.invalidLength(length))
        }

        var out: [UInt8] = []
        out.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for (offset, byte) in input.enumerated() {
            let value = values[Int(byte)]
            guard value != Self.invalid else { return .failure(.invalidCharacter(offset: offset)) }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // A third `=` (`A===`) is still in `input`, and was refused above as a
        // character where no padding may be. What is left in `accumulator`
        // are the unused bits, ignored (see `Base64DecodingError`).
        return .success(out)
    }

    private func symbol(_ n: UInt32) -> UInt8 {
        symbols[Int(n & 63)]
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
