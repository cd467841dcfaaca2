import PinproxyPolicy
import Testing

/// Every spelling of an address a browser accepts reaches the same policy.
@Suite("IP literal canonicalisation")
struct IPLiteralTests {
    @Test(arguments: [
        ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"), ("127.0.1", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("127.0.0.1", "127.0.0.1"),
        ("::ffff:127.0.0.1", "127.0.0.1"), ("0:0:0:0:0:ffff:7f00:1", "127.0.0.1"), ("2001:DB8:0:0:0:0:0:1", "2001:db8::1"),
        ("0x0a.0.0.1", "10.0.0.1"), ("4294967295", "255.255.255.255"),
    ])
    func spellingsOfAnAddressBecomeOne(text: String, canonical: String) {
        #expect(IPLiteral.parse(text.lowercased()) == .address(canonical))
        #expect(HostPattern.normalize("[\(text)].") == canonical || HostPattern.normalize(text) == canonical)
    }

    @Test(arguments: ["1.2.3.256", "1.2.3.4.5", "4294967296", "09.1.1.1", "1..2", "foo.123"])
    func aHostEndingInANumberThatIsNoAddressIsInvalid(text: String) {
        #expect(IPLiteral.parse(text) == .invalid)
    }

    @Test(arguments: ["api.spotify.com", "a1.example", "123.example", "0x.example", "0x1g"])
    func namesStayNames(text: String) {
        #expect(IPLiteral.parse(text) == .name)
    }

    @Test func aDenyOnAnAddressMatchesItsOtherSpellings() throws {
        let matcher = HostMatcher([(try HostPattern(parsing: "127.0.0.1"), "deny")])
        for spelling in ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "127.0.0.1."] {
            #expect(matcher.match(spelling) == "deny", "\(spelling)")
        }
    }
}
