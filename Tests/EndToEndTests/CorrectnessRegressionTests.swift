import Foundation
import PinproxyTestSupport
import Testing

/// What a new user saw go wrong, replayed against the real binary with real
/// peers (`openssl s_server`, a scripted Python upstream, curl): refusals
/// counted once, access lines that say what happened, an app that does not
/// trust the CA made visible, mTLS failures named for what they are.
@Suite("Correctness regressions", .blockingWaits, .serialized)
struct CorrectnessRegressionTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let mtls12: OpenSSLServer
        let mtls13: OpenSSLServer
        let pinned: OpenSSLServer
        let scripted: ScriptedUpstream
        let proxy: ProxyHarness

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-correctness")
            pki = try TestPKI.make(in: dir, names: ["mtls12.test", "mtls13.test", "pinned.test"])
            // Servers that require a client certificate pinproxy does not have.
            mtls12 = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.chainFile,
                                       arguments: ["-www", "-tls1_2", "-Verify", "1", "-CAfile", pki.rootCertificate])
            mtls13 = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.chainFile,
                                       arguments: ["-www", "-tls1_3", "-Verify", "1", "-CAfile", pki.rootCertificate])
            pinned = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.chainFile)
            scripted = try ScriptedUpstream(directory: dir)
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("mtls12.test", upstream: .port(mtls12.port)),
                .intercept("mtls13.test", upstream: .port(mtls13.port)),
                .intercept("pinned.test", upstream: .port(pinned.port),
                           #"pins: { spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}] }"#),
                .tunnel("plain.test", upstream: .port(scripted.port), "response_timeout: 1s"),
            ], caFile: pki.rootCertificate), mainConfig: Scenario.loopbackAllowed, directory: dir)
        }

        func metrics() throws -> PrometheusText {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body)
        }

        func lines(host: String) -> [[String: Any]] {
            proxy.accessLog.filter { ($0["host"] as? String) == host }
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    // Item 5: a server that requires a client certificate is not a cipher problem.
    @Test(arguments: ["mtls12.test", "mtls13.test"])
    func aServerRequiringAClientCertificateIsAHandshakeFailureThatSaysSo(host: String) async throws {
        let s = try await Self.setup.value
        let result = try Curl.run("https://\(host)/", proxy: s.proxy, directory: s.dir)
        #expect(result.status == 502, "\(result.status) \(result.body)")
        #expect(result.pinproxyError == "tls_handshake", "\(result.body)")
        #expect(result.body.contains("client certificate"), "\(result.body)")
    }

    // Item 3: an enforced mismatch's access line names the verdict; its log line lists the pins.
    @Test func aRefusedPinCheckIsInTheAccessLineAndTheObservedPinsAreAList() async throws {
        let s = try await Self.setup.value
        let result = try Curl.run("https://pinned.test/", proxy: s.proxy, directory: s.dir)
        #expect(result.pinproxyError == "pin_mismatch")
        let line = try #require(await pollFor(timeout: 10) { s.lines(host: "pinned.test").last })
        #expect(line["pin"] as? String == "mismatch_enforced", "\(line)")
        let failure = s.proxy.log.split(separator: "\n").compactMap { text -> [String: Any]? in
            guard text.contains("upstream pin check failed") else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        }.last
        let observed = failure?["observed_pins"] as? [String]
        #expect(observed?.count == 3, "leaf, intermediate and root, as a JSON array: \(String(describing: failure))")
    }

    // Item 4: an app that does not trust the CA is counted and said at warning level.
    @Test func anAppThatDoesNotTrustTheCAIsCountedAndWarnedAbout() async throws {
        let s = try await Self.setup.value
        let before = try s.metrics().value("pinproxy_client_handshakes_total", ["result": "untrusted_ca"]) ?? -1
        let result = try Curl.run("https://pinned.test/", proxyURL: s.proxy.proxyURL, caFile: s.pki.rootCertificate, directory: s.dir)
        #expect(result.exitCode != 0)
        let after = try await pollFor(timeout: 10) { () -> Double? in
            let value = try s.metrics().value("pinproxy_client_handshakes_total", ["result": "untrusted_ca"]) ?? -1
            return value > before ? value : nil
        }
        #expect(after == before + 1)
        #expect(s.proxy.log.split(separator: "\n").contains {
            $0.contains("client TLS handshake failed") && $0.contains("\"level\":\"warning\"") && $0.contains("pinned.test")
        }, "a warning line names the app's host: \(s.proxy.log.suffix(2000))")
    }

    // Item 17: a body cut short upstream is cut short to the app, and logged as such.
    @Test func aResponseResetMidBodyIsCutShortAndLoggedAsAnError() async throws {
        let s = try await Self.setup.value
        let result = try Curl.run("http://plain.test/reset-mid-body", proxy: s.proxy, extra: ["--max-time", "20"], directory: s.dir)
        #expect(result.exitCode != 0, "curl sees a short body")
        #expect(result.body.utf8.count < 1_000_000)
        let line = try #require(await pollFor(timeout: 10) { s.lines(host: "plain.test").last { ($0["path"] as? String) == "/reset-mid-body" } })
        #expect(line["error"] as? String == "upstream_closed", "\(line)")
    }

    // Item 18: a stall in the middle of a body is cut after response_timeout.
    @Test func aResponseStalledMidBodyIsCutAfterResponseTimeout() async throws {
        let s = try await Self.setup.value
        let result = try Curl.run("http://plain.test/stall-mid-body", proxy: s.proxy, extra: ["--max-time", "15"], directory: s.dir)
        #expect(result.exitCode != 0 && result.exitCode != 28, "pinproxy cut it, not curl's own 15 s limit (exit \(result.exitCode))")
        let line = try #require(await pollFor(timeout: 10) { s.lines(host: "plain.test").last { ($0["path"] as? String) == "/stall-mid-body" } })
        #expect(line["error"] as? String == "upstream_timeout", "\(line)")
        #expect((line["bytes_down"] as? Int ?? 0) >= 65_536)
    }

    // Item 2: the first refusal after start is one access line and one count.
    @Test func theFirstRefusedConnectIsLoggedAndCountedOnce() async throws {
        let dir = try TemporaryDirectory("pinproxy-first-refusal")
        let proxy = try ProxyHarness(policies: "hosts:\n  - match: other.test\n    action: deny\n", mainConfig: "default_action: deny\n", directory: dir)
        let result = try Curl.run("https://nowhere.test/", proxy: proxy, directory: dir)
        #expect(result.connectStatus == 403)
        // A second refusal, made after the first connection closed: once its
        // line is written, a second line or count for the first would be too.
        #expect(try Curl.run("https://later.test/", proxy: proxy, directory: dir).connectStatus == 403)
        let lines = proxy.waitForAccessLog(count: 2)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.filter { ($0["host"] as? String) == "nowhere.test" }.count == 1, "\(lines)")
        let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect(metrics.value("pinproxy_requests_total", ["host": "_none", "code": "403"]) == 2)
        #expect(metrics.value("pinproxy_denied_total", ["reason": "host_denied"]) == 2)
    }
}
