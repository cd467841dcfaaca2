#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `::1/128`) for the client ACL and
/// the SSRF guard's exemptions. A bare address is a host route (/32, /128).
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable {
        case ipv4
        case ipv6
    }

    /// Network address bytes (4 or 16), host bits cleared.
    public let network: [UInt8]
    public let prefixLength: Int

    public var family: Family { network.count == 4 ? .ipv4 : .ipv6 }

    /// Parses `ADDRESS/PREFIX` or a bare `ADDRESS`. Host bits set in the
    /// address are an error: `10.1.0.0/8` is more likely a typo than intent.
    public init(parsing text: String) throws(CIDRParseError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let bytes = IPAddress.parse(String(parts[0])) else {
            throw CIDRParseError(message: "`\(text)` is not a CIDR (expected ADDRESS/PREFIX, e.g. 10.0.0.0/8 or ::1/128)")
        }
        let maximum = bytes.count * 8
        var length = maximum
        if parts.count == 2 {
            guard let parsed = Int(parts[1]), (0...maximum).contains(parsed) else {
                throw CIDRParseError(message: "`\(text)`: prefix length must be 0 to \(maximum)")
            }
            length = parsed
        }
        let masked = Self.mask(bytes, prefixLength: length)
        guard masked == bytes else {
            throw CIDRParseError(message: "`\(text)` has host bits set (did you mean `\(IPAddress.format(masked))/\(length)`?)")
        }
        self.network = masked
        self.prefixLength = length
    }

    /// True when `address` (text) lies in this network. An IPv4-mapped IPv6
    /// address (`::ffff:127.0.0.1`) is judged as the IPv4 address it carries.
    public func contains(_ address: String) -> Bool {
        guard let bytes = IPAddress.parse(address) else { return false }
        return contains(bytes: bytes)
    }

    /// True when the raw address (4 or 16 bytes) lies in this network.
    public func contains(bytes: [UInt8]) -> Bool {
        var candidate = bytes
        if candidate.count == 16, network.count == 4, IPAddress.isIPv4Mapped(candidate) {
            candidate = Array(candidate.suffix(4))
        }
        guard candidate.count == network.count else { return false }
        return Self.mask(candidate, prefixLength: prefixLength) == network
    }

    public var description: String { "\(IPAddress.format(network))/\(prefixLength)" }

    private static func mask(_ bytes: [UInt8], prefixLength: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bits = max(0, min(8, prefixLength - index * 8))
            return bits == 0 ? 0 : byte & UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
        }
    }
}

public struct CIDRParseError: Error, Sendable, Hashable {
    public var message: String
}

/// IP address text ⇄ bytes through the C library, which knows every IPv6 form.
public enum IPAddress {
    /// 4 bytes for IPv4, 16 for IPv6, nil for anything else. Brackets
    /// (`[::1]`) are accepted, as in URLs and `HOST:PORT`.
    public static func parse(_ text: String) -> [UInt8]? {
        var t = text
        if t.hasPrefix("["), t.hasSuffix("]") { t = String(t.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, t, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, t, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    public static func format(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return bytes.map(String.init).joined(separator: ".") }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    static func isIPv4Mapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
    }
}
