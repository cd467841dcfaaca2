import Foundation
import PinproxyTestSupport
import Testing

/// Every pin verdict of DESIGN §3, through the proxy, with curl as the legacy
/// app and a real `openssl s_server` as the upstream.
@Suite("Pin verdicts through the proxy", .serialized)
struct PinVerdictTests {
    static let names = [
        "leaf.pin.test", "intermediate.pin.test", "root.pin.test", "wrong.pin.test", "report.pin.test",
        "window-open.pin.test", "window-over.pin.test", "expired.pin.test", "chain-only.pin.test",
        "cert.pin.test", "untrusted.pin.test", "unpinned.pin.test",
    ]

    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let server: OpenSSLServer
        let proxy: ProxyHarness

        init() throws {
            dir = try TemporaryDirectory("pinproxy-pins")
            pki = try TestPKI.make(in: dir, names: PinVerdictTests.names)
            let other = try TestPKI.make(in: dir, name: "other")
            server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
            let leaf = try TestPKI.opensslSPKIPin(pki.leafCertificate)
            let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
            let wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
            let wrong2 = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="
            let certHash = try ChildProcess.check("/bin/sh", ["-c", "openssl x509 -in '\(pki.leafCertificate)' -outform der | openssl dgst -sha256 -binary | base64"])
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let day: TimeInterval = 86_400
            func date(_ offset: TimeInterval) -> String {
                let f = ISO8601DateFormatter()
                f.formatOptions = [.withInternetDateTime]
                return f.string(from: Date().addingTimeInterval(offset))
            }
            let upstreamPort = server.port
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
            let policies = "hosts:\n" + [
                policy("leaf.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"sha256/\(leaf)\"\n" + backup),
                policy("intermediate.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(intermediate)\"\n" + backup),
                policy("root.pin.test", pins: "    pins:\n      spki_sha256:\n        - pin: \"\(root)\"\n" + backup),
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
            proxy = try ProxyHarness(policies: policies, mainConfig: "network:\n  allow: [127.0.0.0/8]\nlog:\n  format: json\n", directory: dir)
        }
    }

    static let setup = Result { try Setup() }

    private func request(_ host: String) throws -> CurlResult {
        let s = try Self.setup.get()
        return try Curl.run("https://\(host)/", proxy: s.proxy, directory: s.dir)
    }

    @Test(arguments: ["leaf.pin.test", "intermediate.pin.test", "root.pin.test", "cert.pin.test"])
    func aPinOnAnyCertificateOfTheVerifiedChainMatches(host: String) throws {
        let result = try request(host)
        #expect(result.status == 200, "\(result.stderr) \(result.body)")
        #expect(result.body.contains("s_server"), "the body is the upstream's status page")
        #expect(result.headers["via"] == "1.1 pinproxy")
    }

    @Test func onlyWrongPinsAreRefusedWith502AndTheObservedPins() throws {
        let s = try Self.setup.get()
        let result = try request("wrong.pin.test")
        #expect(result.status == 502)
        #expect(result.pinproxyError == "pin_mismatch")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
        #expect(body["error"] as? String == "pin_mismatch")
        #expect(body["host"] as? String == "wrong.pin.test")
        let leaf = try TestPKI.opensslSPKIPin(s.pki.leafCertificate)
        #expect((body["detail"] as? String)?.contains("sha256/\(leaf)") == true)
        // The log names the host, the policy file and the pins seen, leaf to root.
        let logLine = try #require(s.proxy.log.split(separator: "\n").first { $0.contains("upstream pin check failed") && $0.contains("wrong.pin.test") })
        #expect(logLine.contains("test.yaml"))
        // `observed_pins` is a JSON array, leaf first.
        #expect(logLine.contains("\"observed_pins\":[\"sha256/\(leaf)\",\"sha256/\(try TestPKI.opensslSPKIPin(s.pki.intermediateCertificate))\""), "\(logLine)")
    }

    @Test func reportModeLetsAMismatchThroughAndLogsIt() throws {
        let s = try Self.setup.get()
        let result = try request("report.pin.test")
        #expect(result.status == 200)
        #expect(s.proxy.log.contains("upstream pin mismatch reported, not enforced"))
    }

    @Test func aMismatchInsideTheTransitionWindowGoesThroughAndAfterItDoesNot() throws {
        #expect(try request("window-open.pin.test").status == 200)
        let after = try request("window-over.pin.test")
        #expect(after.status == 502)
        #expect(after.pinproxyError == "pin_mismatch")
    }

    @Test func allPinsExpiredFailsUnlessTheyFallBackToTheChain() throws {
        let expired = try request("expired.pin.test")
        #expect(expired.status == 502)
        #expect(expired.pinproxyError == "pins_expired")
        #expect(try request("chain-only.pin.test").status == 200)
    }

    @Test func anUntrustedChainIsRefusedEvenWithAMatchingPin() throws {
        let result = try request("untrusted.pin.test")
        #expect(result.status == 502)
        #expect(result.pinproxyError == "verify_failed")
        #expect(result.body.contains("unable to get local issuer certificate"))
    }

    @Test func theAccessLogRecordsEachVerdict() throws {
        let s = try Self.setup.get()
        let before = s.proxy.accessLog.count  // the suite's proxy is shared
        _ = try request("unpinned.pin.test")
        _ = try request("leaf.pin.test")
        let lines = s.proxy.waitForAccessLog(count: before + 2)
        let verdicts = Dictionary(lines.compactMap { line -> (String, String)? in
            guard let host = line["host"] as? String, let pin = line["pin"] as? String else { return nil }
            return (host, pin)
        }, uniquingKeysWith: { a, _ in a })
        #expect(verdicts["unpinned.pin.test"] == "unpinned")
        #expect(verdicts["leaf.pin.test"] == "match")
        let line = try #require(lines.last { ($0["host"] as? String) == "leaf.pin.test" })
        #expect(line["status"] as? Int == 200)
        #expect(line["mode"] as? String == "intercept")
        #expect((line["client"] as? String)?.hasPrefix("127.0.0.1:") == true)
        #expect(line["policy"] as? String == "leaf.pin.test")
    }
}
