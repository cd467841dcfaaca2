/// `application/x-www-form-urlencoded`, both ways: the token endpoint's
/// request bodies, the swap endpoints' bodies, the Basic credentials of
/// RFC 6749 §2.3.1 and the authorize URL's query.
///
/// Encoding keeps RFC 3986's unreserved characters (`A–Z a–z 0–9 - . _ ~`)
/// and writes every other UTF-8 byte as `%XX`, so the output is the same
/// under any decoder. Decoding follows the WHATWG URL standard: `+` is a
/// space, `%XX` is a byte, a `%` not followed by two hex digits stays as it
/// is, and bytes that are not UTF-8 become U+FFFD.
public enum FormEncoding {
    /// How a space is written: `+` in form bodies; `%20` in a URL's query,
    /// where RFC 3986 gives `+` no meaning and a reader may take it literally.
    public enum Space: Sendable {
        case plus
        case percent20
    }

    /// `name=value&name=value`, in the given order.
    public static func encode(_ pairs: [(String, String)], space: Space = .plus) -> String {
        pairs.map { escape($0.0, space: space) + "=" + escape($0.1, space: space) }.joined(separator: "&")
    }

    /// One name or value.
    public static func escape(_ text: String, space: Space = .plus) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else if byte == UInt8(ascii: " "), space == .plus {
                out.append(UInt8(ascii: "+"))
            } else {
                out += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The pairs of a body, in order; empty segments (`a=1&&b=2`) are skipped
    /// and a segment without `=` is a name with an empty value.
    public static func decode(_ body: [UInt8]) -> [(String, String)] {
        body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    /// One name or value, as `decode` reads it.
    public static func unescape(_ text: String) -> String {
        unescape(ArraySlice(text.utf8))
    }

    private static func unescape(_ bytes: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), i + 2 < bytes.endIndex,
                      let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 2
            } else {
                out.append(byte)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
