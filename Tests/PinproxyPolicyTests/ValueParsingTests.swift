import Foundation
import PinproxyPolicy
import Testing

struct ValueParsingTests {
    @Test(arguments: [("250ms", 0.25), ("10s", 10), ("5m", 300), ("1h", 3600), ("30d", 2_592_000), ("0", 0)])
    func durations(text: String, seconds: Double) {
        #expect(DurationText.parse(text)?.timeInterval == seconds)
    }

    @Test(arguments: ["", "5", "1.5s", "10 s", "-1s", "1h30m", "s", "0s0"])
    func badDurations(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test func horizonTakesADurationOrDays() {
        #expect(DurationText.parseHorizon("30") == .seconds(30 * 86400))
        #expect(DurationText.parseHorizon("720h") == .seconds(720 * 3600))
        #expect(DurationText.parseHorizon("30d") == .seconds(30 * 86400))
        #expect(DurationText.parseHorizon("soon") == nil)
    }

    @Test func dateAloneIsAWholeDayInUTC() {
        let start = DateText.parse("2026-08-20", bound: .start)!
        let end = DateText.parse("2026-08-20", bound: .end)!
        #expect(DateText.format(start) == "2026-08-20T00:00:00Z")
        #expect(DateText.format(end) == "2026-08-20T23:59:59Z")
        #expect(end < DateText.parse("2026-08-21", bound: .start)!)
        #expect(end.timeIntervalSince(start) > 86399.99)
        let pin = Pin(hash: Fixture.pin(1), notAfter: end)
        #expect(pin.isActive(at: DateText.parse("2026-08-20T23:59:59.5Z", bound: .start)!))
        #expect(!pin.isActive(at: DateText.parse("2026-08-21T00:00:00Z", bound: .start)!))
    }

    @Test func dateTimes() {
        #expect(DateText.parse("2026-08-20T12:00:00", bound: .end) == DateText.parse("2026-08-20T12:00:00Z", bound: .start))
        #expect(DateText.format(DateText.parse("2026-08-20T12:00:00+02:00", bound: .start)!) == "2026-08-20T10:00:00Z")
        #expect(DateText.format(DateText.parse("2026-08-20 12:00:00.75Z", bound: .start)!) == "2026-08-20T12:00:00Z")
        for bad in ["2026-02-29", "2026-13-01", "2026-08-20T25:00:00Z", "20-08-2026", "2026-08-20Tnoon"] {
            #expect(DateText.parse(bad, bound: .start) == nil, "\(bad)")
        }
        #expect(DateText.parse("2028-02-29", bound: .start) != nil)
    }

    @Test func cidrs() throws {
        let v4 = try CIDR(parsing: "127.0.0.0/8")
        #expect(v4.contains("127.1.2.3") && !v4.contains("128.0.0.1"))
        #expect(v4.contains("::ffff:127.0.0.1"))
        let v6 = try CIDR(parsing: "fd00::/8")
        #expect(v6.contains("fd12:3456::1") && !v6.contains("fe80::1") && !v6.contains("10.0.0.1"))
        #expect(try CIDR(parsing: "::1").description == "::1/128")
        #expect(throws: CIDRParseError.self) { try CIDR(parsing: "10.1.0.0/8") }
        #expect(throws: CIDRParseError.self) { try CIDR(parsing: "10.0.0.0/33") }
        #expect(throws: CIDRParseError.self) { try CIDR(parsing: "example.com/8") }
    }

    @Test func hostPorts() {
        #expect(HostPort(parsing: "127.0.0.1:8080") == HostPort(host: "127.0.0.1", port: 8080))
        #expect(HostPort(parsing: "[::1]:9090")?.description == "[::1]:9090")
        #expect(HostPort(parsing: "::1:9090") == nil)
        #expect(HostPort(parsing: "host:0") == nil)
        #expect(HostPort(parsing: "host") == nil)
    }

    /// An authority's host: an IPv6 address bracketed once, anything else as it is.
    @Test func hostsAsAnAuthorityWritesThem() {
        #expect(HostPort.bracketed("2001:db8::1") == "[2001:db8::1]")
        #expect(HostPort.bracketed("[::1]") == "[::1]")
        #expect(HostPort.bracketed("127.0.0.1") == "127.0.0.1")
        #expect(HostPort.bracketed("api.example.com") == "api.example.com")
        #expect(HostPort(host: "::1", port: 8080).description == "[::1]:8080")
    }

    @Test func unknownKeySuggestions() {
        #expect(KeySuggestionProbe.nearest("ciphersuits", in: ConfigKeys.policy["hosts[].tls"]!) == "ciphersuites")
    }
}

/// `KeySuggestion` is internal; exercise it through a loaded file instead.
enum KeySuggestionProbe {
    static func nearest(_ key: String, in known: [String]) -> String? {
        let tree = try! ConfigTree(policies: ["p.yaml": "hosts:\n  - match: a.example.com\n    tls: {\(key): x}\n"])
        let message = tree.loader().load().errors.first?.message ?? ""
        guard let range = message.range(of: "did you mean `") else { return nil }
        return String(message[range.upperBound...].prefix { $0 != "`" })
    }
}
