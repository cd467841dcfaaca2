import Foundation
import PinproxyAdmin
import PinproxyPolicy
import PinproxyTestSupport
import Testing

/// `GET /policies` shows what each policy enforces right now: an operator
/// sees that a host is report-only, inside its transition window, out of
/// pins or unpinned, and the TLS and routing it uses, without the YAML.
@Suite(.blockingWaits)
struct PolicyEnforcementDocumentTests {
    static let policies = """
        hosts:
          - match: enforced.example.com
            upstream: [10.0.0.1:8443, "backup.internal:443"]
            upgrade_to_tls: true
            tls:
              min_version: "1.3"
              ciphersuites: TLS_AES_256_GCM_SHA384
              ca_file: ca.pem
            pins:
              spki_sha256:
                - pin: "\(AdminFixture.pin(1))"
                  note: current intermediate
                - pin: "\(AdminFixture.pin(2))"
          - match: report.example.com
            pins:
              mode: report
              on_expiry: chain_only
              spki_sha256: [{pin: "\(AdminFixture.pin(1))"}, {pin: "\(AdminFixture.pin(2))"}]
          - match: window.example.com
            pins:
              spki_sha256: [{pin: "\(AdminFixture.pin(1))"}, {pin: "\(AdminFixture.pin(2))"}]
              transition: {from: 2026-11-01, until: 2026-12-01}
          - match: expired.example.com
            pins:
              spki_sha256: [{pin: "\(AdminFixture.pin(1))", not_after: 2026-01-01}]
          - match: unpinned.example.com
          - match: tunnelled.example.com
            action: tunnel
        """

    /// The policies, with the trust file `enforced.example.com` names.
    static func fixture() throws -> AdminFixture {
        let fixture = try AdminFixture(policies: policies)
        let pki = try TestPKI.make(in: fixture.directory)
        try FileManager.default.copyItem(atPath: pki.rootCertificate, toPath: fixture.directory.file("policies/ca.pem"))
        return fixture
    }

    @Test func eachHostSaysWhatAMismatchGetsNow() async throws {
        let fixture = try Self.fixture()
        let store = try fixture.store()
        try await withAdminServer(store: store, providers: AdminEndpointTests.ready) { client in
            let hosts = try #require(try await client.get("/policies").json()["hosts"] as? [[String: Any]])
            let byMatch = Dictionary(uniqueKeysWithValues: hosts.map { ($0["match"] as! String, $0) })
            func enforcement(_ host: String) -> [String: Any]? { byMatch[host]?["enforcement"] as? [String: Any] }

            let enforced = try #require(byMatch["enforced.example.com"])
            #expect(enforced["upstream"] as? [String] == ["10.0.0.1:8443", "backup.internal:443"])
            #expect(enforced["upgrade_to_tls"] as? Bool == true)
            let tls = try #require(enforced["tls"] as? [String: Any])
            #expect(Set(tls.keys) == ["min_version", "max_version", "allow_legacy_tls", "ciphers", "ciphersuites", "ca_file", "client_cert"])
            #expect(tls["min_version"] as? String == "1.3")
            #expect(tls["max_version"] is NSNull)
            #expect(tls["ciphersuites"] as? String == "TLS_AES_256_GCM_SHA384")
            #expect((tls["ca_file"] as? String)?.hasSuffix("/policies/ca.pem") == true)
            #expect(tls["client_cert"] is NSNull)
            let pins = try #require(enforced["pins"] as? [[String: Any]])
            #expect(pins.first?["note"] as? String == "current intermediate")
            #expect(pins.last?["note"] is NSNull)
            #expect(Set(try #require(enforcement("enforced.example.com")).keys) == ["mode", "on_expiry", "transition", "in_effect"])
            #expect(enforcement("enforced.example.com")?["mode"] as? String == "enforce")
            #expect(enforcement("enforced.example.com")?["on_expiry"] as? String == "fail")
            #expect(enforcement("enforced.example.com")?["transition"] is NSNull)
            #expect(enforcement("enforced.example.com")?["in_effect"] as? String == "enforce")

            #expect(enforcement("report.example.com")?["mode"] as? String == "report")
            #expect(enforcement("report.example.com")?["on_expiry"] as? String == "chain_only")
            #expect(enforcement("report.example.com")?["in_effect"] as? String == "report_mode")

            let window = try #require(enforcement("window.example.com")?["transition"] as? [String: Any])
            #expect(window["from"] as? String == "2026-11-01T00:00:00Z")
            #expect(window["until"] as? String == "2026-12-01T23:59:59Z")
            #expect(window["active"] as? Bool == true)
            #expect(enforcement("window.example.com")?["in_effect"] as? String == "transition_window")

            #expect(enforcement("expired.example.com")?["in_effect"] as? String == "pins_expired")

            #expect(enforcement("unpinned.example.com")?["mode"] is NSNull)
            #expect(enforcement("unpinned.example.com")?["in_effect"] as? String == "unpinned")

            // A tunnel never evaluates pins: no enforcement to show.
            #expect(byMatch["tunnelled.example.com"]?["enforcement"] is NSNull)
            #expect((byMatch["tunnelled.example.com"]?["upstream"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func aProbeLetThroughByReportModeShowsItsVerdict() async throws {
        let fixture = try Self.fixture()
        let at = DateText.parse("2026-11-22T11:50:00Z", bound: .start)!
        let providers = AdminServer.Providers(readiness: AdminEndpointTests.ready.readiness, probe: { pattern in
            pattern == "report.example.com"
                ? ProbeStatus(success: true, at: at, verdict: "mismatch_reported", detail: "observed (leaf to root): sha256/x")
                : nil
        })
        try await withAdminServer(store: try fixture.store(), providers: providers) { client in
            let hosts = try #require(try await client.get("/policies").json()["hosts"] as? [[String: Any]])
            let probe = try #require(hosts.first { $0["match"] as? String == "report.example.com" }?["probe"] as? [String: Any])
            #expect(probe["success"] as? Bool == true)
            #expect(probe["verdict"] as? String == "mismatch_reported")
            #expect(probe["detail"] as? String == "observed (leaf to root): sha256/x")
        }
    }
}
