import Foundation
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// An upstream's 429 holds that credential back until its `Retry-After`
/// passes (docs/contract.md §4 `upstream_throttled`), through the in-process
/// proxy and curl. The window's end is read from the injected clock, which
/// the test moves past it: no waiting for the wall clock to get there.
@Suite("Upstream 429 windows", .blockingWaits)
struct UpstreamThrottleWindowTests {
    /// Tokens for every credential, with no accounts service behind them:
    /// what is under test is the window, not how a token is had. With
    /// `atHand`, a token is also there without waiting (`tokenNow`, which
    /// the exchange asks on its loop), spelt apart from the waited-for one
    /// so that the test sees which way it went.
    struct FixedTokens: BearerTokenProvider {
        let atHand: Bool
        func token(session: String) async throws -> BearerToken { BearerToken(value: "token-\(session)", generation: 1) }
        func tokenNow(session: String) -> BearerToken? { atHand ? BearerToken(value: "now-\(session)", generation: 1) : nil }
        func invalidate(session: String, generation: Int) {}
    }

    /// The same whether the token is at hand or waited for: an open window
    /// holds the credential back either way.
    @Test(arguments: [false, true])
    func anUpstream429HoldsThatCredentialBackUntilRetryAfterPasses(tokenAtHand: Bool) async throws {
        let dir = try TemporaryDirectory("pinproxy-throttle")
        let pki = try TestPKI.make(in: dir, names: ["api.test", "keys.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        for (name, value) in [("basic.token", "basic-value"), ("gh.token", "gh-value")] {
            _ = chmod(try dir.write(name, value + "\n"), 0o600)
        }
        // Pinned: a credential goes only to a pinned upstream (`attach_unpinned` is off).
        let pins = Scenario.pins(try TestPKI.opensslSPKIPin(pki.intermediateCertificate), Scenario.backupPin)
        func host(_ name: String, _ credential: String) -> String {
            """
              - match: \(name)
                action: intercept
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                \(pins)
                auth: {credential: \(credential)}
            """
        }
        let policies = "hosts:\n" + host("api.test", "basic") + "\n" + host("keys.test", "gh") + "\n"
        let main = InProcessProxy.loopbackAllowed + """
            credentials:
              basic: {kind: static, value_file: ../basic.token}
              gh: {kind: static, value_file: ../gh.token}
            """
        let clock = ProxyTestClock()
        try await InProcessProxy.run(policies: policies, mainConfig: main, directory: dir,
                                     upstreams: .loopback(["api.test": upstream.port, "keys.test": upstream.port]), clock: clock) { proxy in
            proxy.server.setTokenProvider(FixedTokens(atHand: tokenAtHand))
            let sent = tokenAtHand ? "Bearer now-basic" : "Bearer token-basic"
            func limited() -> Int { upstream.requests.withLockedValue { $0 }.filter { $0.contains("/status/429") }.count }

            #expect(try proxy.curl("https://api.test/status/429").status == 429, "a 429 without Retry-After opens no window")
            let before = try proxy.curl("https://api.test/echo")
            #expect(before.status == 200)
            #expect(before.body.contains(sent), "\(before.body)")
            let first = try proxy.curl("https://api.test/status/429?retry-after=600")
            #expect(first.status == 429)
            #expect(first.headers["x-pinproxy-error"] == nil, "the upstream's own 429 goes to the app")
            let seen = limited()
            let held = try proxy.curl("https://api.test/status/429")
            #expect(held.status == 429)
            #expect(held.headers["x-pinproxy-error"] == "upstream_throttled")
            #expect(Int(held.headers["retry-after"] ?? "") ?? 0 >= 1)
            #expect(limited() == seen, "the upstream saw none of the held requests")
            // Another credential to the same upstream is not held back.
            #expect(try proxy.curl("https://keys.test/echo").status == 200)
            // Ten minutes: still held halfway, through once the clock passed the end
            // (the wall clock is minutes short of either).
            clock.advance(by: .seconds(300))
            let halfway = try proxy.curl("https://api.test/echo")
            #expect(halfway.headers["x-pinproxy-error"] == "upstream_throttled")
            #expect((Int(halfway.headers["retry-after"] ?? "") ?? 0) <= 300, "the window's end is read from the injected clock")
            clock.advance(by: .seconds(301))
            let after = try proxy.curl("https://api.test/echo")
            #expect(after.status == 200, "\(after.body)")
            #expect(after.body.contains(sent), "the credential went up again: \(after.body)")
        }
    }
}
