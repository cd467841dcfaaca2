import Foundation
import PinproxyTestSupport
import Testing

/// HPACK's never-indexed flag (RFC 7541 §7.1.3) kept both ways by an
/// intercepted HTTP/2 session over an HTTP/2 upstream (docs/contract.md
/// §11). Both ends are Python's `h2` on real TLS: the app
/// (Scripts/h2_app.py, `sensitive`) through pinproxy's CONNECT, the upstream
/// (Scripts/h2_upstream.py, `never-indexed`), each reporting which fields
/// it received never-indexed.
@Suite("Never-indexed fields through HTTP/2", .blockingWaits, .serialized)
struct HTTP2NeverIndexedTests {
    @Test func aFieldSentNeverIndexedArrivesNeverIndexedBothWays() throws {
        let dir = try TemporaryDirectory("pinproxy-h2-never-indexed")
        let upstream = try PythonH2Upstream(mode: "never-indexed", host: "sensitive.test", in: dir)
        defer { upstream.stop() }
        let proxy = try ProxyHarness(policies: upstream.policy("sensitive.test", "    upstream_protocol: h2"),
                                     mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let answer = try HTTP2Tests.runH2App(proxy, host: "sensitive.test", mode: "sensitive", wait: 10)
        #expect(answer.status == 200 && answer.end == "answered", "\(answer)")
        #expect(answer.neverIndexed == ["set-cookie"], "the upstream's set-cookie reached the app never-indexed")
        let request = try #require(upstream.process.outputText.split(separator: "\n").first { $0.hasPrefix("REQ /sensitive ") })
        #expect(request.contains(" never=authorization "), "the app's authorization reached the upstream never-indexed: \(request)")
        #expect(request.contains(",accept,") && request.hasSuffix(",via"), "the other fields went too, indexable: \(request)")
    }
}
