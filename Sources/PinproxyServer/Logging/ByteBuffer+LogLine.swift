import NIOCore
import PinproxyPolicy

/// Writing a log line's pieces straight into the buffer the writer thread
/// drains: numbers as decimal digits and strings as JSON literals, with no
/// `String` made on the way (the access line is rendered once a request;
/// bench/README.md, issue 33).
extension ByteBuffer {
    /// `value` in decimal, as `String(value)` spells it.
    mutating func writeDecimal(_ value: Int) {
        if value < 0 { writeInteger(UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var count = 1
        var rest = magnitude / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        writeWithUnsafeMutableBytes(minimumWritableBytes: count) { out in
            var left = magnitude
            for index in stride(from: count - 1, through: 0, by: -1) {
                out[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: left % 10)
                left /= 10
            }
            return count
        }
    }

    /// `value` zero-padded to `width` digits (timestamps); `value` ≥ 0.
    mutating func writeDecimal(_ value: Int, width: Int) {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        for _ in digits..<Swift.max(digits, width) { writeInteger(UInt8(ascii: "0")) }
        writeDecimal(value)
    }

    /// A number of tenths (`tenths / 10`) as Swift's `Double.description`
    /// spells it: `12.3`, `5.0`, `0.0`. Whole tenths below 2^53 print as
    /// exactly one decimal; anything else (never a duration) falls back to
    /// the `String`.
    mutating func writeTenths(_ tenths: Double) {
        guard tenths.isFinite, tenths.sign == .plus, tenths < 9_007_199_254_740_992 else {
            writeString(String(tenths / 10))
            return
        }
        let whole = Int(tenths)
        writeDecimal(whole / 10)
        writeInteger(UInt8(ascii: "."))
        writeInteger(UInt8(ascii: "0") + UInt8(whole % 10))
    }

    /// `text` as a quoted JSON string; only text that needs escaping (a
    /// quote, a backslash, a control character) builds a string first.
    mutating func writeJSONQuoted(_ text: String) {
        writeInteger(UInt8(ascii: "\""))
        if Self.needsJSONEscaping(text.utf8) { writeString(JSONString.escape(text)) } else { writeString(text) }
        writeInteger(UInt8(ascii: "\""))
    }

    /// As above, for a slice (a path without its query).
    mutating func writeJSONQuoted(_ text: Substring) {
        writeInteger(UInt8(ascii: "\""))
        if Self.needsJSONEscaping(text.utf8) { writeString(JSONString.escape(String(text))) } else { writeSubstring(text) }
        writeInteger(UInt8(ascii: "\""))
    }

    private static func needsJSONEscaping<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Bool {
        bytes.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }
}
