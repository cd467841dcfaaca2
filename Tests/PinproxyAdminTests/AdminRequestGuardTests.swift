@testable import PinproxyAdmin
import Testing

/// The admin API's DNS-rebinding and cross-site guard as a table
/// (docs/contract.md §5): which `Host`, `Origin` and `Sec-Fetch-Site` get an
/// answer, for a listener on loopback, on a specific address and on a wildcard.
struct AdminRequestGuardTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var listen: String
        var host: String?
        var origin: String? = nil
        var fetchSite: String? = nil
        var post = false
        var configured: [String] = []
        var expected: String  // "allowed", "421" or "403"
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "the listen address", listen: "127.0.0.1", host: "127.0.0.1:9090", expected: "allowed"),
        Row(name: "localhost", listen: "127.0.0.1", host: "localhost:9090", expected: "allowed"),
        Row(name: "a .localhost name", listen: "127.0.0.1", host: "admin.localhost:9090", expected: "allowed"),
        Row(name: "IPv6 loopback", listen: "127.0.0.1", host: "[::1]:9090", expected: "allowed"),
        Row(name: "no Host (HTTP/1.0)", listen: "127.0.0.1", host: nil, expected: "allowed"),
        Row(name: "a rebound name", listen: "127.0.0.1", host: "evil.test:9090", expected: "421"),
        Row(name: "a rebound name, any case, trailing dot", listen: "127.0.0.1", host: "Evil.Test.", expected: "421"),
        Row(name: "a configured name", listen: "127.0.0.1", host: "pinproxy.internal:9090", configured: ["pinproxy.internal"],
            expected: "allowed"),
        Row(name: "another address than the specific one bound", listen: "10.0.0.5", host: "10.0.0.6:9090", expected: "421"),
        Row(name: "the specific address bound (a probe)", listen: "10.0.0.5", host: "10.0.0.5:9090", expected: "allowed"),
        Row(name: "a pod IP when bound to 0.0.0.0", listen: "0.0.0.0", host: "10.1.2.3:9090", expected: "allowed"),
        Row(name: "an IPv6 address when bound to ::", listen: "::", host: "[fd00::5]:9090", expected: "allowed"),
        Row(name: "a name when bound to 0.0.0.0", listen: "0.0.0.0", host: "evil.test:9090", expected: "421"),
        Row(name: "POST from a tool", listen: "127.0.0.1", host: "127.0.0.1:9090", post: true, expected: "allowed"),
        Row(name: "POST marked cross-site", listen: "127.0.0.1", host: "127.0.0.1:9090", fetchSite: "cross-site", post: true,
            expected: "403"),
        Row(name: "POST marked same-site (another port)", listen: "127.0.0.1", host: "127.0.0.1:9090", fetchSite: "same-site",
            post: true, expected: "403"),
        Row(name: "POST same-origin", listen: "127.0.0.1", host: "127.0.0.1:9090", origin: "http://127.0.0.1:9090",
            fetchSite: "same-origin", post: true, expected: "allowed"),
        Row(name: "POST with a foreign Origin", listen: "127.0.0.1", host: "127.0.0.1:9090", origin: "http://evil.test",
            post: true, expected: "403"),
        Row(name: "POST with Origin null", listen: "127.0.0.1", host: "127.0.0.1:9090", origin: "null", post: true, expected: "403"),
        Row(name: "GET with a foreign Origin reads nothing it could not (CORS)", listen: "127.0.0.1", host: "127.0.0.1:9090",
            origin: "http://evil.test", expected: "allowed"),
    ]

    @Test(arguments: rows)
    func judges(row: Row) {
        let verdict = AdminRequestGuard(listenHost: row.listen).judge(
            host: row.host, origin: row.origin, fetchSite: row.fetchSite, stateChanging: row.post, configured: row.configured)
        switch verdict {
        case .allowed: #expect(row.expected == "allowed", "\(verdict)")
        case .misdirected: #expect(row.expected == "421", "\(verdict)")
        case .forbidden: #expect(row.expected == "403", "\(verdict)")
        }
    }
}
