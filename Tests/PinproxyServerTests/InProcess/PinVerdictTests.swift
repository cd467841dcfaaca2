import Foundation
import Logging
import PinproxyTLS
import PinproxyTestSupport
import Testing

/// Every pin verdict of docs/contract.md §3, through the in-process proxy,
/// with curl as the legacy app and a real `openssl s_server` as the upstream
/// (so neither TLS leg is checked by pinproxy's own TLS code on both ends).
@Suite("Pin verdicts through the proxy", .blockingWaits)
struct PinVerdictTests {
    static let names = [
        "leaf.pin.test", "intermediate.pin.test", "root.pin.test", "wrong.pin.test", "report.pin.test",
        "window-open.pin.test", "window-over.pin.test", "expired.pin.test", "chain-only.pin.test",
        "cert.pin.test", "untrusted.pin.test", "unpinned.pin.test", "root-resumed.pin.test",
    ]

    /// The suite's PKI and pins. Each test starts its own `s_server` (it
    /// serves one connection at a time: shared by tests side by side, some
    /// of their dials waited past the timeout, 504) and a proxy of its own.
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let other: TestPKI
        let leaf, intermediate, root, certHash: String
        let wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        let wrong2 = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="

        init() throws {
            dir = try TemporaryDirectory("pinproxy-pins")
            pki = try TestPKI.make(in: dir, names: PinVerdictTests.names)
            other = try TestPKI.make(in: dir, name: "other")
            leaf = try TestPKI.opensslSPKIPin(pki.leafCertificate)
            intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
            certHash = try ChildProcess.check("/bin/sh", ["-c", "openssl x509 -in '\(pki.leafCertificate)' -outform der | openssl dgst -sha256 -binary | base64"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Every host of the table, upstream at `upstreamPort`; dates are relative to now.
        func policies(upstreamPort: Int) -> String {
            let (leaf, intermediate, root, certHash, wrong, wrong2) = (leaf, intermediate, root, certHash, wrong, wrong2)
            let day: TimeInterval = 86_400
            func date(_ offset: TimeInterval) -> String {
                let f = ISO8601DateFormatter()
                f.formatOptions = [.withInternetDateTime]
                return f.string(from: Date().addingTimeInterval(offset))
            }
            let rootFile = pki.rootCertificate
            func policy(_ name: String, pins: String, ca: String? = nil) -> String {
                """
                  - match: \(name)
                    action: intercept
                    upstream: 127.0.0.1:\(upstreamPort)
                    tls:
                      ca_file: \(ca ?? rootFile)
                \(pins)
                """
            }
            let backup = "        - pin: \"\(wrong2)\"\n"
            return "hosts:\n" + [
                policy("leaf.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"sha256/\(leaf)\"\n" + backup),
                policy("intermediate.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(intermediate)\"\n" + backup),
                policy("root.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(root)\"\n" + backup),
                policy("root-resumed.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(root)\"\n" + backup),
                policy("wrong.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(wrong)\"\n" + backup),
                policy("report.pin.test", pins: "    pins:\n      mode: report\n      spki_sha256:\n        - pin: \"\(wrong)\"\n" + backup),
                policy("window-open.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(wrong)\"\n\(backup)      transition:\n        from: \(date(-day))\n        until: \(date(day))\n"),
                policy("window-over.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(wrong)\"\n\(backup)      transition:\n        from: \(date(-3 * day))\n        until: \(date(-day))\n"),
                policy("expired.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(leaf)\"\n          not_after: \(date(-day))\n"),
                policy("chain-only.pin.test", pins: "    pins:\n      on_expiry: chain_only\n      spki_sha256:\n        - pin: \"\(wrong)\"\n          not_after: \(date(-day))\n"),
                policy("cert.pin.test", pins: "    pins:\n      cert_sha256:\n        - pin: \"\(certHash)\"\n" + "        - pin: \"\(wrong2)\"\n"),
                policy("untrusted.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(leaf)\"\n" + backup, ca: other.rootCertificate),
                policy("unpinned.pin.test", pins: ""),
            ].joined(separator: "\n")
        }

        /// An `s_server` and a proxy of the test's own, both stopped when `body` ends.
        func run(clock: ProxyTestClock = ProxyTestClock(), _ body: (InProcessProxy, OpenSSLServer) async throws -> Void) async throws {
            let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
            defer { server.stop() }
            try await InProcessProxy.run(policies: policies(upstreamPort: server.port), clock: clock) { proxy in
                try await body(proxy, server)
            }
        }
    }

    static let setup = Task.blockingSetup { try Setup() }

    private func request(_ host: String, through proxy: InProcessProxy) throws -> CurlResult {
        try proxy.curl("https://\(host)/")
    }

    /// One verdict of docs/contract.md §3 "Pin evaluation", as the app, the
    /// access log and the metrics each show it.
    struct Verdict: Sendable, CustomTestStringConvertible {
        var host: String
        var status: Int
        /// `X-Pinproxy-Error` (nil: the request went through).
        var error: String?
        /// The access line's `pin`, and the `pin_validations_total` result
        /// counted (nil: OpenSSL refused the chain before pins were looked at).
        var pin: String?
        /// The `upstream_handshakes_total` result.
        var handshake: String

        var testDescription: String { host }
    }

    static let verdicts: [Verdict] = [
        Verdict(host: "leaf.pin.test", status: 200, error: nil, pin: "match", handshake: "ok"),
        Verdict(host: "intermediate.pin.test", status: 200, error: nil, pin: "match", handshake: "ok"),
        Verdict(host: "root.pin.test", status: 200, error: nil, pin: "match", handshake: "ok"),
        Verdict(host: "cert.pin.test", status: 200, error: nil, pin: "match", handshake: "ok"),
        Verdict(host: "wrong.pin.test", status: 502, error: "pin_mismatch", pin: "mismatch_enforced", handshake: "pin_mismatch"),
        Verdict(host: "window-over.pin.test", status: 502, error: "pin_mismatch", pin: "mismatch_enforced", handshake: "pin_mismatch"),
        Verdict(host: "report.pin.test", status: 200, error: nil, pin: "mismatch_reported", handshake: "ok"),
        Verdict(host: "window-open.pin.test", status: 200, error: nil, pin: "mismatch_reported", handshake: "ok"),
        Verdict(host: "expired.pin.test", status: 502, error: "pins_expired", pin: "no_active_pins", handshake: "pins_expired"),
        Verdict(host: "chain-only.pin.test", status: 200, error: nil, pin: "no_active_pins", handshake: "ok"),
        Verdict(host: "unpinned.pin.test", status: 200, error: nil, pin: "unpinned", handshake: "ok"),
        Verdict(host: "untrusted.pin.test", status: 502, error: "verify_failed", pin: nil, handshake: "verify_failed"),
    ]

    /// Every verdict against an `openssl s_server`, so neither TLS leg
    /// of the check is pinproxy's own code on both ends. Counts are compared
    /// before and after; `s_server -www` closes after each answer, so each
    /// request is one new upstream handshake and one pin evaluation.
    @Test(arguments: verdicts)
    func eachVerdictShowsInTheAnswerTheAccessLineAndTheMetrics(_ verdict: Verdict) async throws {
        let s = try await Self.setup.value
        try await s.run { proxy, server in
            let before = try proxy.scrape()
            let linesBefore = proxy.accessLog.count

            let result = try request(verdict.host, through: proxy)
            #expect(result.status == verdict.status, "\(result.stderr) \(result.body)")
            #expect(result.pinproxyError == verdict.error)
            if verdict.error == nil {
                #expect(result.body.contains("s_server"), "the body is s_server's status page")
                // `s_server -www` answers in HTTP/1.0, and `Via` names what pinproxy received.
                #expect(result.headers["via"] == "1.0 pinproxy")
            } else {
                let body = try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any]
                #expect(body?["error"] as? String == verdict.error)
                #expect(body?["host"] as? String == verdict.host)
            }

            let lines = await proxy.waitForAccessLog(count: linesBefore + 1)
            let line = try #require(lines.dropFirst(linesBefore).last { $0["host"] == verdict.host }, "\(lines)")
            #expect(line["status"] == String(verdict.status))
            #expect(line["pin"] == verdict.pin, "\(line)")
            #expect(line["error"] == verdict.error, "\(line)")
            if verdict.error == nil {
                #expect(line["upstream"] == "127.0.0.1:\(server.port)", "the upstream was s_server")
            }

            let after = try proxy.scrape()
            func delta(_ name: String, _ labels: [String: String]) -> Double {
                let sum = { (text: PrometheusText) in text.matching(name, labels).reduce(0) { $0 + $1.value } }
                return sum(after) - sum(before)
            }
            let host = ["host": verdict.host]
            #expect(delta("pinproxy_pin_validations_total", host) == (verdict.pin == nil ? 0 : 1), "one evaluation, or none")
            if let pin = verdict.pin {
                #expect(delta("pinproxy_pin_validations_total", ["host": verdict.host, "result": pin]) == 1)
            }
            #expect(delta("pinproxy_upstream_handshakes_total", host) == 1)
            #expect(delta("pinproxy_upstream_handshakes_total", ["host": verdict.host, "result": verdict.handshake]) == 1)
            #expect(delta("pinproxy_requests_total", ["host": verdict.host, "code": String(verdict.status)]) == 1)
            if let error = verdict.error {
                #expect(delta("pinproxy_denied_total", ["reason": error]) == 1)
            }
        }
    }

    /// The root is not in the chain s_server sends: only OpenSSL's verified
    /// chain has it. On a resumed session OpenSSL has no verified chain, so
    /// the pins must not then be judged on the chain as sent. The second
    /// request resumes the session the first one left (s_server issues TLS
    /// 1.3 tickets; pinproxy keeps them per policy and host). Its own host,
    /// so that no other test's session is resumed by the verdict table.
    @Test func aRootPinStillMatchesWhenTheUpstreamSessionIsResumed() async throws {
        try await Self.setup.value.run { proxy, _ in
            let first = try request("root-resumed.pin.test", through: proxy)
            #expect(first.status == 200, "\(first.body)")
            let second = try request("root-resumed.pin.test", through: proxy)
            #expect(second.status == 200, "\(second.body)")
            #expect(second.pinproxyError == nil)
        }
    }

    @Test func onlyWrongPinsAreRefusedWith502AndTheObservedPins() async throws {
        let s = try await Self.setup.value
        try await s.run { proxy, _ in
            let result = try request("wrong.pin.test", through: proxy)
            #expect(result.status == 502)
            #expect(result.pinproxyError == "pin_mismatch")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
            #expect(body["error"] as? String == "pin_mismatch")
            #expect(body["host"] as? String == "wrong.pin.test")
            let leaf = try TestPKI.opensslSPKIPin(s.pki.leafCertificate)
            #expect((body["detail"] as? String)?.contains("sha256/\(leaf)") == true)
            // The log names the host, the policy file and the pins seen, leaf to root.
            let logLine = try #require(proxy.log.first { $0.message == "upstream pin check failed" && $0.metadata["host"] == "wrong.pin.test" })
            #expect(logLine.metadata["file"]?.contains("test.yaml") == true, "\(logLine.metadata)")
            // `observed_pins` is an array (a JSON array in the log), leaf first.
            let observed = try #require(logLine.values["observed_pins"].flatMap(Self.strings), "\(logLine.metadata)")
            #expect(Array(observed.prefix(2)) == ["sha256/\(leaf)", "sha256/\(try TestPKI.opensslSPKIPin(s.pki.intermediateCertificate))"],
                    "\(observed)")
            // Subject and issuer of each certificate seen, in the answer and the log,
            // so a rotation is told from an interception (issue 28 item 14).
            let leafCertificate = try Certificate.loadPEM(file: s.pki.leafCertificate)[0]
            let intermediate = try Certificate.loadPEM(file: s.pki.intermediateCertificate)[0]
            let detail = try #require(body["detail"] as? String)
            #expect(detail.contains("sha256/\(leaf) (subject \(leafCertificate.subject), issuer \(leafCertificate.issuer))"), "\(detail)")
            #expect(detail.contains("(subject \(intermediate.subject), issuer \(intermediate.issuer))"), "\(detail)")
            let chain = try #require(logLine.values["observed_chain"].flatMap(Self.dictionaries), "\(logLine.metadata)")
            #expect(chain.first?["pin"] == "sha256/\(leaf)")
            #expect(chain.first?["subject"] == leafCertificate.subject)
            #expect(chain.first?["issuer"] == leafCertificate.issuer)
            #expect(chain.dropFirst().first?["issuer"] == intermediate.issuer)
        }
    }

    @Test func reportModeLetsAMismatchThroughAndLogsIt() async throws {
        try await Self.setup.value.run { proxy, _ in
            let result = try request("report.pin.test", through: proxy)
            #expect(result.status == 200)
            #expect(proxy.log.contains { $0.message == "upstream pin mismatch reported, not enforced" })
        }
    }

    @Test func aMismatchInsideTheTransitionWindowGoesThroughAndAfterItDoesNot() async throws {
        try await Self.setup.value.run { proxy, _ in
            #expect(try request("window-open.pin.test", through: proxy).status == 200)
            let after = try request("window-over.pin.test", through: proxy)
            #expect(after.status == 502)
            #expect(after.pinproxyError == "pin_mismatch")
        }
    }

    /// The same host across its transition window's end, on the injected
    /// clock: through (reported) today, refused once the clock is two days on.
    @Test func aTransitionWindowEndsWhenTheClockPassesIt() async throws {
        let clock = ProxyTestClock()
        try await Self.setup.value.run(clock: clock) { proxy, _ in
            #expect(try request("window-open.pin.test", through: proxy).status == 200)
            clock.advance(by: .seconds(2 * 86_400))
            let after = try request("window-open.pin.test", through: proxy)
            #expect(after.status == 502, "\(after.body)")
            #expect(after.pinproxyError == "pin_mismatch")
        }
    }

    @Test func allPinsExpiredFailsUnlessTheyFallBackToTheChain() async throws {
        try await Self.setup.value.run { proxy, _ in
            let expired = try request("expired.pin.test", through: proxy)
            #expect(expired.status == 502)
            #expect(expired.pinproxyError == "pins_expired")
            let chainOnly = try request("chain-only.pin.test", through: proxy)
            #expect(chainOnly.status == 200, "\(chainOnly.stderr) \(chainOnly.body)")
        }
    }

    @Test func anUntrustedChainIsRefusedEvenWithAMatchingPin() async throws {
        try await Self.setup.value.run { proxy, _ in
            let result = try request("untrusted.pin.test", through: proxy)
            #expect(result.status == 502)
            #expect(result.pinproxyError == "verify_failed")
            #expect(result.body.contains("unable to get local issuer certificate"))
        }
    }

    @Test func theAccessLogRecordsEachVerdict() async throws {
        try await Self.setup.value.run { proxy, _ in
            _ = try request("unpinned.pin.test", through: proxy)
            _ = try request("leaf.pin.test", through: proxy)
            let lines = await proxy.waitForAccessLog(count: 2)
            let verdicts = Dictionary(lines.compactMap { line -> (String, String)? in
                guard let host = line["host"], let pin = line["pin"] else { return nil }
                return (host, pin)
            }, uniquingKeysWith: { a, _ in a })
            #expect(verdicts["unpinned.pin.test"] == "unpinned")
            #expect(verdicts["leaf.pin.test"] == "match")
            let line = try #require(lines.last { $0["host"] == "leaf.pin.test" })
            #expect(line["status"] == "200")
            #expect(line["mode"] == "intercept")
            #expect(line["client"]?.hasPrefix("127.0.0.1:") == true)
            #expect(line["policy"] == "leaf.pin.test")
        }
    }

    static func strings(_ value: Logger.MetadataValue) -> [String]? {
        guard case .array(let values) = value else { return nil }
        return values.map { "\($0)" }
    }

    static func dictionaries(_ value: Logger.MetadataValue) -> [[String: String]]? {
        guard case .array(let values) = value else { return nil }
        return values.compactMap { item in
            guard case .dictionary(let fields) = item else { return nil }
            return fields.mapValues { "\($0)" }
        }
    }
}
