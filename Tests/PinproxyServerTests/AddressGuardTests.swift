import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// The SSRF guard's classification, below the dial: no test lets the proxy
/// dial these addresses (a failing one would send traffic off loopback).
@Suite("SSRF guard classification")
struct AddressGuardTests {
    private let guardDefault = AddressGuard(denyPrivate: true, allow: [])

    private func refusal(_ text: String) -> String? {
        guardDefault.refusal(for: IPAddress.parse(text)!)
    }

    @Test(arguments: [
        "::127.0.0.2", "::10.0.0.1", "::8.8.8.8",            // IPv4-compatible ::/96, refused whole
        "::ffff:127.0.0.1", "::ffff:10.1.2.3",               // IPv4-mapped
        "::ffff:0:192.168.1.1",                              // IPv4-translated
        "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe",           // NAT64 to loopback, link-local
        "64:ff9b:1::8.8.8.8",                                // local-use NAT64, refused whole
        "2002:7f00:1::1", "2002:0a00:0001::5",               // 6to4 of loopback, RFC 1918
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",              // Teredo, refused whole
        "2001:db8::1", "fe80::1", "fc00::1", "fec0::1", "100::1", "::", "::1", "ff02::1",
        "2a00:1450::200:5efe:7f00:1",                        // ISATAP identifier carrying 127.0.0.1
    ])
    func internalAddressesInEveryIPv6EmbeddingAreRefused(address: String) {
        #expect(refusal(address) != nil, "\(address) must not be dialled")
    }

    @Test(arguments: ["8.8.8.8", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2a00:1450:4001:81b::200e"])
    func publicAddressesPass(address: String) {
        #expect(refusal(address) == nil, "\(address): \(refusal(address) ?? "")")
    }

    @Test func theReasonNamesTheEmbedding() {
        #expect(refusal("::127.0.0.2")?.contains("IPv4-compatible") == true)
        #expect(refusal("2002:7f00:1::1")?.contains("6to4") == true)
    }

    @Test func anAllowedRangeIsExempt() throws {
        let guardAllowing = AddressGuard(denyPrivate: true, allow: [try CIDR(parsing: "127.0.0.0/8")])
        #expect(guardAllowing.refusal(for: IPAddress.parse("127.0.0.1")!) == nil)
    }
}
