import Foundation
import PinproxyTestSupport
import Testing

/// Upstream faults in the middle of an intercepted exchange (docs/contract.md
/// §14): a real TLS upstream in Python that resets, stalls or closes, and an
/// app in Python that reports at the byte level what it received. A body cut
/// short upstream reaches the app cut short — never completed, never padded,
/// the connection never used again — is logged once, counted, and the next
/// request is served.
@Suite("Upstream faults end to end", .blockingWaits, .serialized)
struct UpstreamFaultTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let upstream: ScriptedUpstream
        let proxy: ProxyHarness

        init() throws {
            dir = try TemporaryDirectory("pinproxy-faults")
            pki = try TestPKI.make(in: dir, names: ["faults.test"])
            upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("faults.test", upstream: .port(upstream.port), "response_timeout: 1s"),
            ], caFile: pki.rootCertificate), mainConfig: Scenario.loopbackAllowed, directory: dir)
        }

        func get(_ paths: [String], timeout: Double = 30) throws -> ProxiedTLSClient.Result {
            try ProxiedTLSClient.run(proxyPort: proxy.port, host: "faults.test", paths: paths, caFile: proxy.caFile,
                                     directory: dir, timeout: timeout)
        }

        func metrics() throws -> PrometheusText {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body)
        }

        func lines(path: String) -> [[String: Any]] {
            proxy.accessLog.filter { ($0["path"] as? String) == path }
        }

        /// The proxy log's lines with `message` (JSON lines, not the access log).
        func logLines(_ message: String) -> [Substring] {
            proxy.log.split(separator: "\n").filter { $0.contains("\"message\":\"\(message)\"") }
        }

        /// The next request, on a new connection, is served whole.
        func nextIsServed() throws {
            let next = try get(["/ok"])
            #expect(next.exchanges.map(\.status) == [200])
            #expect(next.exchanges.first?.end == "complete")
            #expect(next.exchanges.first?.body == Data("ok".utf8))
        }
    }

    /// One exchange that was cut: what the app read, the one access line, the
    /// one warning and the count.
    func expectCutShort(_ s: Setup, _ result: ProxiedTLSClient.Result, path: String, filler: UInt8, failure: String) throws {
        #expect(result.connectStatus == 200)
        let exchange = try #require(result.exchanges.first, "\(result)")
        #expect(exchange.status == 200, "the head had gone to the app before the fault")
        #expect(exchange.end == "eof" || exchange.end == "reset", "the proxy closed the app's connection (\(exchange.end))")
        #expect(!result.answeredAfter, "the cut connection carried no other request")
        if let length = exchange.contentLength {
            #expect(exchange.body.count < length, "never completed: \(exchange.body.count) of \(length)")
            #expect(exchange.body.allSatisfy { $0 == filler }, "never padded: only the upstream's own bytes")
        } else {
            #expect(exchange.isChunked)
            #expect(!exchange.chunkedTerminated, "the chunked stream was not terminated")
            let text = String(decoding: exchange.body, as: UTF8.self)
            #expect(text.allSatisfy { $0 == Character(UnicodeScalar(filler)) || "0123456789abcdef\r\n".contains($0) }, "never padded")
        }
        let line = try #require(pollForBlocking { s.lines(path: path).first })
        #expect(s.lines(path: path).count == 1, "one access line")
        #expect(line["error"] as? String == failure, "\(line)")
        #expect(line["status"] as? Int == 200)
        let warnings = s.logLines("response cut short")
        #expect(warnings.count == 1, "logged once: \(warnings)")
        #expect(warnings.first?.contains(failure) == true)
        let metrics = try s.metrics()
        #expect(metrics.value("pinproxy_responses_cut_total", ["host": "faults.test", "reason": failure]) == 1)
        #expect(metrics.value("pinproxy_requests_total", ["host": "faults.test", "code": "200"]) == 1)
    }

    @Test func aBodyResetMidwayReachesTheAppCutShort() throws {
        let s = try Setup()
        let result = try s.get(["/reset-mid-body"])
        try expectCutShort(s, result, path: "/reset-mid-body", filler: UInt8(ascii: "x"), failure: "upstream_closed")
        try s.nextIsServed()
    }

    @Test func aChunkedBodyResetMidwayIsNeverTerminated() throws {
        let s = try Setup()
        let result = try s.get(["/reset-mid-chunked"])
        try expectCutShort(s, result, path: "/reset-mid-chunked", filler: UInt8(ascii: "c"), failure: "upstream_closed")
        try s.nextIsServed()
    }

    @Test func aBodyStalledPastResponseTimeoutIsCut() throws {
        let s = try Setup()
        // The upstream goes quiet for 20 s; the app waits up to 15 s, so the
        // cut it sees is pinproxy's (response_timeout: 1s), not its own.
        let result = try s.get(["/stall-mid-body"], timeout: 15)
        try expectCutShort(s, result, path: "/stall-mid-body", filler: UInt8(ascii: "y"), failure: "upstream_timeout")
        try s.nextIsServed()
    }

    @Test func anUpstreamThatClosesEveryPooledConnectionAfterAnsweringLosesNoRequest() throws {
        let s = try Setup()
        let paths = (1...12).map { "/close-after-answer?n=\($0)" }
        let result = try s.get(paths)
        #expect(result.exchanges.map(\.status) == Array(repeating: 200, count: 12), "\(result.exchanges.map(\.head))")
        #expect(result.exchanges.allSatisfy { $0.end == "complete" && $0.body == Data("ok".utf8) })
        #expect(result.answeredAfter, "the app's own connection stayed usable")
        // Each request reached the upstream exactly once: none lost, none sent twice.
        #expect(pollUntilBlocking { s.upstream.count("GET /close-after-answer") == 12 })
        let lines = s.proxy.waitForAccessLog(count: 13)
        let served = lines.filter { ($0["path"] as? String) == "/close-after-answer" }
        #expect(served.count == 12)
        #expect(served.allSatisfy { $0["status"] as? Int == 200 && $0["error"] == nil }, "\(served)")
        #expect(s.logLines("response cut short").isEmpty)
        #expect(try s.metrics().value("pinproxy_requests_total", ["host": "faults.test", "code": "200"]) == 13)
    }
}
