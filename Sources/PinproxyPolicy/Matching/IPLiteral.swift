/// IP address literals in the one spelling policies are matched against.
///
/// A deny on `127.0.0.1` must also deny `2130706433`, `0x7f000001`,
/// `0177.0.0.1`, `127.1` and `[::ffff:127.0.0.1]`: every one of them reaches
/// the same address. Host names are therefore canonicalised the way browsers
/// parse URL hosts (the WHATWG URL standard's IPv4 parser: one to four parts,
/// each decimal, `0x` hex or `0`-prefixed octal, the last filling the
/// remaining bytes), IPv6 literals are printed in RFC 5952 form, and an
/// IPv4-mapped IPv6 address becomes its IPv4 address.
public enum IPLiteral {
    public enum Parsed: Equatable, Sendable {
        /// Not an IP literal: a host name, left as it is.
        case name
        /// An IP literal, in canonical text.
        case address(String)
        /// Ends in a number but is no IPv4 address (`1.2.3.256`, `1.2.3.4.5`):
        /// browsers refuse such a host, and so does pinproxy.
        case invalid
    }

    /// Classifies an already lowercased host with brackets and trailing dots removed.
    public static func parse(_ host: String) -> Parsed {
        if host.utf8.contains(UInt8(ascii: ":")) {
            guard let bytes = IPAddress.parse(host) else { return .invalid }
            if IPAddress.isIPv4Mapped(bytes) { return .address(IPAddress.format(Array(bytes[12..<16]))) }
            return .address(IPAddress.format(bytes))
        }
        guard endsInNumber(host) else { return .name }
        guard let value = ipv4(host) else { return .invalid }
        return .address("\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)")
    }

    /// The canonical text of an IP literal, or the host unchanged.
    public static func canonical(_ host: String) -> String {
        if case .address(let text) = parse(host) { return text }
        return host
    }

    /// The WHATWG "ends in a number" check: the last label is all digits, or
    /// `0x` and hex. Runs on every routed host, so it looks at the last label
    /// in place: a name (`api.example.com`) is known as one at its last byte.
    private static func endsInNumber(_ host: String) -> Bool {
        let utf8 = host.utf8
        guard let lastByte = utf8.last, (lastByte >= 48 && lastByte <= 57) || isHexLetterOrX(lastByte) else { return false }
        let start = utf8.lastIndex(of: UInt8(ascii: ".")).map { utf8.index(after: $0) } ?? utf8.startIndex
        let last = Substring(host.utf8[start...])
        guard !last.isEmpty else { return false }
        if last.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { return true }
        return number(last) != nil
    }

    private static func isHexLetterOrX(_ byte: UInt8) -> Bool {
        (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70) || byte == UInt8(ascii: "x") || byte == UInt8(ascii: "X")
    }

    private static func ipv4(_ host: String) -> UInt32? {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            numbers.append(value)
        }
        let last = numbers.removeLast()
        guard numbers.allSatisfy({ $0 <= 255 }), last < (1 << (8 * UInt64(5 - parts.count))) else { return nil }
        var value = last
        for (index, byte) in numbers.enumerated() {
            value += byte << (8 * UInt64(3 - index))
        }
        return UInt32(value)
    }

    /// One part: decimal, `0x` hex (`0x` alone is 0) or `0`-prefixed octal.
    private static func number(_ part: Substring) -> UInt64? {
        guard !part.isEmpty else { return nil }
        var text = part
        var radix: UInt64 = 10
        if text.count >= 2, text.hasPrefix("0x") || text.hasPrefix("0X") {
            text = text.dropFirst(2)
            radix = 16
            if text.isEmpty { return 0 }
        } else if text.count >= 2, text.hasPrefix("0") {
            text = text.dropFirst()
            radix = 8
        }
        guard text.utf8.count <= 32 else { return nil }
        var value: UInt64 = 0
        for byte in text.utf8 {
            let digit: UInt64
            switch byte {
            case 48...57: digit = UInt64(byte - 48)
            case 97...102: digit = UInt64(byte - 87)
            case 65...70: digit = UInt64(byte - 55)
            default: return nil
            }
            guard digit < radix else { return nil }
            value = value * radix + digit
            if value > UInt64(UInt32.max) { return nil }
        }
        return value
    }
}
