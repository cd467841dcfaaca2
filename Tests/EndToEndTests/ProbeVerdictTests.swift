import Foundation
import PinproxyTestSupport
import Testing

/// A probe whose chain matches no pin, let through by report mode or a
/// transition window, must not look like a clean pass: `probe_success` is 1
/// (the handshake passed the policy) but `/policies` gives the verdict and
/// `pin_validations_total{result="mismatch_reported"}` counts it, so the
/// mismatch alert fires with no client traffic at all.
@Suite("Probe verdicts", .blockingWaits)
struct ProbeVerdictTests {
    @Test func aReportedMismatchSeenByAProbeIsCountedAndShown() async throws {
        let dir = try TemporaryDirectory("pinproxy-probe-verdict")
        let pki = try TestPKI.make(in: dir, names: ["report.test", "window.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let day: TimeInterval = 86400
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        let (from, until) = (formatter.string(from: Date() - day), formatter.string(from: Date() + 30 * day))
        // Neither pin is in the chain.
        let pins = #"spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}]"#
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: report.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 1s
                pins:
                  mode: report
                  \(pins)
              - match: window.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 1s
                pins:
                  \(pins)
                  transition: {from: \(from), until: \(until)}
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        func metrics() throws -> PrometheusText {
            try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir).body)
        }
        for host in ["report.test", "window.test"] {
            let counted = try await pollUntil(timeout: 15, every: 0.2) {
                try metrics().value("pinproxy_pin_validations_total", ["host": host, "result": "mismatch_reported"]) ?? 0 >= 1
            }
            #expect(counted, "\(host): the probe's reported mismatch is counted")
            let text = try metrics()
            #expect(text.value("pinproxy_probe_success", ["host": host]) == 1, "\(host): the handshake passed the policy")
            #expect(text.value("pinproxy_pin_validations_total", ["host": host, "result": "match"]) == 0)
        }
        let policies = try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(policies.body.utf8)) as? [String: Any])
        for host in try #require(document["hosts"] as? [[String: Any]]) {
            let probe = try #require(host["probe"] as? [String: Any])
            #expect(probe["success"] as? Bool == true)
            #expect(probe["verdict"] as? String == "mismatch_reported", "\(host["match"] ?? "")")
            #expect((probe["detail"] as? String)?.contains("sha256/\(try TestPKI.opensslSPKIPin(pki.leafCertificate))") == true)
        }
        let inEffect = (document["hosts"] as? [[String: Any]])?.map { ($0["enforcement"] as? [String: Any])?["in_effect"] as? String }
        #expect(inEffect == ["report_mode", "transition_window"])
        #expect(proxy.accessLog.isEmpty, "no client traffic was involved")
    }
}
