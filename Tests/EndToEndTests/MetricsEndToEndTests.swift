import Foundation
import PinproxyTestSupport
import Testing

/// The proxy's metrics and admin API as an operator scrapes them from the real binary.
@Suite("Metrics and admin API end to end", .blockingWaits, .serialized)
struct MetricsEndToEndTests {
    @Test func aScriptedScenarioShowsExactlyItsCounts() async throws {
        let dir = try TemporaryDirectory("pinproxy-metrics")
        let pki = try TestPKI.make(in: dir, names: ["good.test", "bad.test", "accounts.spotify.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
        try dir.write("secret.txt", accounts.clientSecret)
        let good = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
        let policies = Scenario.policies([
            .intercept("good.test", Scenario.pins(good, Scenario.backupPin), "auth: { spotify: app }"),
            .intercept("accounts.spotify.test", upstream: .port(accounts.port), Scenario.pins(good, Scenario.backupPin)),
            .intercept("bad.test", Scenario.pins("BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=", Scenario.backupPin)),
        ], upstreamPort: upstream.port, caFile: pki.rootCertificate)
        let proxy = try ProxyHarness(policies: policies, mainConfig: """
            network:
              allow: [127.0.0.0/8]
            spotify:
              accounts: https://accounts.spotify.test
              sessions:
                app:
                  flow: client_credentials
                  client_id: \(accounts.clientID)
                  client_secret_file: ../secret.txt
            """, directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"

        let ready = try Curl.run("\(admin)/readyz", proxyURL: nil, caFile: nil, directory: dir)
        #expect(ready.status == 200, "\(ready.body)")

        // Three requests on one client connection (one event loop, so one pooled upstream).
        let next = ["--next", "--proxy", proxy.proxyURL, "--cacert", proxy.caFile]
        let three = try Curl.run("https://good.test/echo", proxy: proxy, extra: next + ["https://good.test/echo"] + next + ["https://good.test/echo"], directory: dir)
        #expect(three.status == 200)
        for _ in 0..<2 {
            #expect(try Curl.run("https://bad.test/echo", proxy: proxy, directory: dir).pinproxyError == "pin_mismatch")
        }
        // One rejected reload: the file watcher sees a broken policy file (and only
        // the watcher: a POST /reload as well would race it into two failures).
        func lastReload() throws -> String? {
            let body = try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir).body
            let document = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            return (document?["last_reload"] as? [String: Any])?["result"] as? String
        }
        func waitForReload(_ result: String) throws -> Bool {
            try pollUntilBlocking(timeout: 15, every: 0.1) { try lastReload() == result }
        }
        try dir.write("etc/policies/broken.yaml", "hosts:\n  - match: broken.test\n    action: sideways\n")
        #expect(try waitForReload("failure"))
        try FileManager.default.removeItem(atPath: dir.file("etc/policies/broken.yaml"))
        #expect(try waitForReload("success"))

        _ = proxy.waitForAccessLog(count: 5)
        let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        #expect(scrape.status == 200)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect(metrics.value("pinproxy_requests_total", ["host": "good.test", "code": "200"]) == 3)
        #expect(metrics.value("pinproxy_requests_total", ["host": "bad.test", "code": "502"]) == 2)
        #expect(metrics.value("pinproxy_denied_total", ["reason": "pin_mismatch"]) == 2)
        #expect(metrics.value("pinproxy_pin_validations_total", ["host": "bad.test", "result": "mismatch_enforced"]) == 2)
        #expect(metrics.value("pinproxy_upstream_handshakes_total", ["host": "bad.test", "result": "pin_mismatch"]) == 2)
        // Three requests, one pooled upstream connection: one handshake, one validation.
        #expect(metrics.value("pinproxy_pin_validations_total", ["host": "good.test", "result": "match"]) == 1)
        #expect(metrics.value("pinproxy_upstream_handshakes_total", ["host": "good.test", "result": "ok"]) == 1)
        #expect(metrics.value("pinproxy_policy_reloads_total", ["result": "failure"]) == 1)
        // One token refresh served all three requests to the authenticated host.
        #expect(accounts.counters.tokenRequests == 1)
        #expect(metrics.value("pinproxy_token_refreshes_total", ["session": "app", "result": "success"]) == 1)
        #expect(metrics.value("pinproxy_token_refreshes_total", ["session": "app", "result": "failure"]) == 0)
        #expect((metrics.value("pinproxy_token_expiry_timestamp_seconds", ["session": "app"]) ?? 0) > Date().timeIntervalSince1970)
        #expect(metrics.value("pinproxy_minted_certificates_total", [:]) == 2, "one leaf each for good.test and bad.test")
        #expect((metrics.value("pinproxy_bytes_total", ["host": "good.test", "direction": "down"]) ?? 0) > 0)
        #expect(metrics.value("pinproxy_upstream_tls_info", ["host": "good.test", "version": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384"]) == 1)

        if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
            let (status, output) = try ChildProcess.run("/usr/bin/promtool", ["check", "metrics"], input: scrape.body)
            #expect(status == 0, "\(output)")
        }
    }
}

extension MetricsEndToEndTests {
    @Test func aProbeSeesAKeyRotationWithNoClientTraffic() async throws {
        let dir = try TemporaryDirectory("pinproxy-probe")
        let pki = try TestPKI.make(in: dir, names: ["probe.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let leafPin = try TestPKI.opensslSPKIPin(pki.leafCertificate)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: probe.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 1s
                pins:
                  spki_sha256: [{pin: "\(leafPin)"}, {pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}]
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        func probeSuccess() throws -> Double? {
            let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body).value("pinproxy_probe_success", ["host": "probe.test"])
        }
        func waitFor(_ value: Double) throws -> Bool {
            try pollUntilBlocking(timeout: 15, every: 0.2) { try probeSuccess() == value }
        }
        #expect(try waitFor(1), "the first probe succeeds")
        let rotated = try pki.makeLeaf(named: "rotated", names: ["probe.test"])
        try upstream.swapCertificate(chainFile: rotated.chain, keyFile: rotated.key)
        #expect(try waitFor(0), "a probe within an interval sees the new key")
        let scrape = try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir).body)
        #expect(scrape.value("pinproxy_pin_validations_total", ["host": "probe.test", "result": "mismatch_enforced"]) ?? 0 >= 1,
                "the probe's mismatch is counted, so the mismatch alert fires without traffic")
        #expect(proxy.log.contains("pin probe failed"))
        #expect(proxy.log.contains("sha256/\(try TestPKI.opensslSPKIPin(rotated.certificate))"), "the failure names the observed pins")
        #expect(proxy.accessLog.isEmpty, "no client traffic was involved")
        let policies = try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(policies.body.utf8)) as? [String: Any])
        let host = try #require((document["hosts"] as? [[String: Any]])?.first)
        let probe = try #require(host["probe"] as? [String: Any])
        #expect(probe["success"] as? Bool == false)
        #expect(probe["verdict"] as? String == "mismatch_enforced")
        #expect(probe["error"] as? String == "pin_mismatch")
    }
}
