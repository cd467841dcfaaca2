import PinproxyPolicy

/// The SSRF guard (docs/contract.md §3 `network`): which upstream addresses pinproxy may
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

    /// The special-purpose range an address falls in, if any. An IPv6
    /// address that carries an IPv4 address is judged by that IPv4 address
    /// too, in every embedding the network stack or a translator honours:
    /// IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96` (deprecated, and
    /// refused whole), IPv4-translated `::ffff:0:0:0/96`, NAT64
    /// `64:ff9b::/96` and its local-use `64:ff9b:1::/48`, 6to4 `2002::/16`,
    /// Teredo `2001::/32` and ISATAP interface identifiers.
    static func specialRange(_ address: [UInt8]) -> String? {
        if address.count == 16 {
            if let embedded = embeddedIPv4(address) {
                if let range = specialRange(embedded.address) { return "\(range), inside \(embedded.form)" }
                if embedded.refusedWhole { return embedded.form }
            }
        }
        for (range, name) in ranges where range.contains(bytes: address) {
            return name
        }
        return nil
    }

    /// The IPv4 address an IPv6 address carries, the embedding's name, and
    /// whether that embedding is refused whatever the IPv4 address is.
    static func embeddedIPv4(_ a: [UInt8]) -> (address: [UInt8], form: String, refusedWhole: Bool)? {
        let zeros = { (range: Range<Int>) in a[range].allSatisfy { $0 == 0 } }
        if zeros(0..<10) && a[10] == 0xFF && a[11] == 0xFF {
            return (Array(a[12..<16]), "IPv4-mapped IPv6 (::ffff:0:0/96)", false)
        }
        if zeros(0..<12) {
            // `::` and `::1` are listed below on their own.
            if zeros(12..<15) && a[15] <= 1 { return nil }
            return (Array(a[12..<16]), "IPv4-compatible IPv6 (::/96, deprecated)", true)
        }
        if zeros(0..<8) && a[8] == 0xFF && a[9] == 0xFF && a[10] == 0 && a[11] == 0 {
            return (Array(a[12..<16]), "IPv4-translated IPv6 (::ffff:0:0:0/96)", false)
        }
        if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xFF && a[3] == 0x9B {
            if zeros(4..<12) { return (Array(a[12..<16]), "NAT64 (64:ff9b::/96)", false) }
            if a[4] == 0x00 && a[5] == 0x01 { return (Array(a[12..<16]), "local-use NAT64 (64:ff9b:1::/48)", true) }
        }
        if a[0] == 0x20 && a[1] == 0x02 {
            return (Array(a[2..<6]), "6to4 (2002::/16)", false)
        }
        if a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0 {
            // Teredo: the server's address in clear, the client's inverted; refused whole.
            return (Array(a[4..<8]), "Teredo (2001::/32)", true)
        }
        if (a[8] == 0x00 || a[8] == 0x02) && a[9] == 0x00 && a[10] == 0x5E && a[11] == 0xFE {
            return (Array(a[12..<16]), "ISATAP interface identifier", false)
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
        ("100::/64", "discard-only (RFC 6666)"),
        ("2001:10::/28", "ORCHID"),
        ("2001:20::/28", "ORCHIDv2"),
        ("fec0::/10", "site-local (deprecated)"),
    ].map { (try! CIDR(parsing: $0.0), $0.1) }
}
