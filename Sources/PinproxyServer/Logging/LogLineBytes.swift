import Foundation
import NIOCore
import PinproxyPolicy

/// A log line's bytes, written into memory reserved for the whole line at
/// once. The access line is about thirty pieces (keys, numbers, quoted
/// strings); written one by one into a `ByteBuffer`, each piece paid the
/// buffer's uniqueness and capacity checks, which cost more than the
/// copying (bench/README.md, issue 33, sixth pass). Here the line's room is
/// reserved once from an upper bound on its length, and each piece is a
/// bounds-checked copy.
///
/// Every write checks the room left and traps rather than write past it:
/// a bound that is too small is a bug to find, never memory to overwrite.
struct LogLineBytes {
    private let start: UnsafeMutableRawPointer
    private let capacity: Int
    private(set) var count = 0

    private init(start: UnsafeMutableRawPointer, capacity: Int) {
        self.start = start
        self.capacity = capacity
    }

    /// Appends to `buffer` the line `write` makes, which must fit in `bound`
    /// bytes (add up `quotedBound` for each string and `numberBound` for each
    /// number, and the length of the fixed text).
    static func write(into buffer: inout ByteBuffer, atMost bound: Int, _ write: (inout LogLineBytes) -> Void) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { room in
            var line = LogLineBytes(start: room.baseAddress!, capacity: room.count)
            write(&line)
            return line.count
        }
    }

    /// The most bytes `text` takes quoted: two quotes, and each byte at most
    /// six (a control character as `\u00XX`).
    static func quotedBound(_ text: some StringProtocol) -> Int { 2 + 6 * text.utf8.count }

    /// The most bytes a number takes: an `Int` in decimal, or a duration that
    /// falls back to `Double.description` (`-1.7976931348623157e+307`).
    static let numberBound = 32

    // MARK: Pieces

    mutating func writeByte(_ byte: UInt8) {
        precondition(count < capacity, "log line longer than its bound")
        start.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        guard let from = bytes.baseAddress, bytes.count > 0 else { return }
        precondition(bytes.count <= capacity - count, "log line longer than its bound")
        (start + count).copyMemory(from: from, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func writeStaticString(_ text: StaticString) {
        writeBytes(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func writeString(_ text: some StringProtocol) {
        Self.withUTF8(of: text) { writeBytes(UnsafeRawBufferPointer($0)) }
    }

    /// `value` in decimal, as `String(value)` spells it.
    mutating func writeDecimal(_ value: Int) {
        if value < 0 { writeByte(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for UInt64.max's 20 digits
        var left = UInt64(value.magnitude)
        withUnsafeMutableBytes(of: &digits) { scratch in
            var index = scratch.count
            repeat {
                index -= 1
                scratch[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: left % 10)
                left /= 10
            } while left > 0
            writeBytes(UnsafeRawBufferPointer(rebasing: scratch[index...]))
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
        for _ in digits..<Swift.max(digits, width) { writeByte(UInt8(ascii: "0")) }
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
        writeByte(UInt8(ascii: "."))
        writeByte(UInt8(ascii: "0") + UInt8(whole % 10))
    }

    /// `text` as a quoted JSON string. Text that needs no escaping (nearly
    /// all: hosts, paths, addresses) is copied as it is; other text goes
    /// through `JSONString.escape`, which never makes a byte more than six.
    mutating func writeJSONQuoted(_ text: some StringProtocol) {
        writeByte(UInt8(ascii: "\""))
        var plain = false
        Self.withUTF8(of: text) { bytes in
            plain = !bytes.contains(where: JSONString.needsEscaping)
            if plain { writeBytes(UnsafeRawBufferPointer(bytes)) }
        }
        if !plain { writeString(JSONString.escape(String(text))) }
        writeByte(UInt8(ascii: "\""))
    }

    /// The text's UTF-8 in place when it is contiguous (every native string
    /// and slice of one), else a copy.
    private static func withUTF8(of text: some StringProtocol, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        if text.utf8.withContiguousStorageIfAvailable(body) != nil { return }
        var copy = String(text)
        copy.withUTF8(body)
    }
}
