import PinproxyPolicy

/// The SSRF guard (DESIGN §3 `network`): which upstream addresses pinproxy may
/// dial. Every resolved address is vetted and only vetted ones are dialled, so
/// a name that resolves to both a public and an internal address cannot be
/// used to reach the internal one, and no second lookup can swap it.
public struct AddressGuard: Sendable {
    public var denyPrivate: Bool
    public var allow: [CIDR]

    public init(denyPrivate: Bool, allow: [CIDR]) {
        self.denyPrivate = denyPrivate
        self.allow = allow
    }

    public init(_ network: PinproxyConfig.Network) {
        self.init(denyPrivate: network.denyPrivate, allow: network.allow)
    }

    /// nil when `address` may be dialled, else why not ("loopback", "RFC 1918", …).
    public func refusal(for address: [UInt8]) -> String? {
        guard denyPrivate else { return nil }
        if allow.contains(where: { $0.contains(bytes: address) }) { return nil }
        return Self.specialRange(address)
    }

    /// The special-purpose range an address falls in, if any.
    static func specialRange(_ address: [UInt8]) -> String? {
        if address.count == 16 {
            // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) carry an IPv4 address.
            if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xff && address[11] == 0xff {
                return specialRange(Array(address[12..<16]))
            }
            if address[0] == 0x00 && address[1] == 0x64 && address[2] == 0xff && address[3] == 0x9b && address[4..<12].allSatisfy({ $0 == 0 }) {
                return specialRange(Array(address[12..<16]))
            }
        }
        for (range, name) in ranges where range.contains(bytes: address) {
            return name
        }
        return nil
    }

    private static let ranges: [(CIDR, String)] = [
        ("0.0.0.0/8", "unspecified (0.0.0.0/8)"),
        ("10.0.0.0/8", "private (RFC 1918)"),
        ("100.64.0.0/10", "carrier-grade NAT (RFC 6598)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private (RFC 1918)"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.168.0.0/16", "private (RFC 1918)"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fc00::/7", "unique local (ULA)"),
        ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"),
        ("2001:db8::/32", "documentation"),
    ].map { (try! CIDR(parsing: $0.0), $0.1) }
}
