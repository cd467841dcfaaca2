import Foundation
import PinproxyTestSupport
import Testing

/// A policy's `rate_limit` (docs/contract.md §4 `rate_limited`) through the
/// in-process proxy and curl: past the burst a request is answered 429
/// locally, and the bucket refills as time passes, read from the injected
/// clock the test moves forward.
@Suite("rate_limit refill", .blockingWaits)
struct RateLimitRefillTests {
    @Test func aSpentBucketRefillsWhenTheClockMovesOn() async throws {
        let dir = try TemporaryDirectory("pinproxy-rate-limit")
        let pki = try TestPKI.make(in: dir, names: ["limited.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        defer { upstream.stop() }
        // One request a minute: the wall clock does not refill it during the test.
        let policies = """
            hosts:
              - match: limited.test
                action: intercept
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                rate_limit: {requests_per_second: 0.0167, burst: 1}
            """
        let clock = ProxyTestClock()
        try await InProcessProxy.run(policies: policies, directory: dir, upstreams: .loopback(["limited.test": upstream.port]),
                                     clock: clock) { proxy in
            #expect(try proxy.curl("https://limited.test/echo").status == 200)
            let refused = try proxy.curl("https://limited.test/echo")
            #expect(refused.status == 429)
            #expect(refused.pinproxyError == "rate_limited")
            #expect((Int(refused.headers["retry-after"] ?? "") ?? 0) > 30, "a minute's bucket: \(refused.headers)")
            let sent = upstream.requests.withLockedValue { $0.count }
            clock.advance(by: .seconds(61))
            let refilled = try proxy.curl("https://limited.test/echo")
            #expect(refilled.status == 200, "\(refilled.body)")
            #expect(upstream.requests.withLockedValue { $0.count } == sent + 1, "the refused request never went up; the refilled one did")
        }
    }
}
