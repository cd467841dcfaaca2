import Foundation
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTestSupport
import Testing

/// docs/contract.md §6: a scripted run of the proxy's calls leaves exactly those
/// counts in the exposition.
struct MetricsScenarioTests {
    static let api = ["host": "api.example.com"]

    @Test func scriptedScenarioLeavesExactCounts() throws {
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        metrics.buildInfo(version: "0.6.0-test")
        let api = try #require(store.snapshot.policy(forHost: "api.example.com")).hostLabel
        let cdn = try #require(store.snapshot.policy(forHost: "img.cdn.example.com")).hostLabel

        // N = 7 good requests through api, each on a new upstream connection.
        for i in 0..<7 {
            metrics.clientConnections(delta: 1)
            metrics.upstreamHandshake(host: api, result: .ok, duration: .milliseconds(40 + i))
            metrics.pinValidation(host: api, result: .match)
            metrics.upstreamConnections(host: api, delta: 1)
            metrics.bytes(host: api, direction: .up, count: 100)
            metrics.bytes(host: api, direction: .down, count: 1000)
            metrics.requestCompleted(host: api, code: 200, duration: .milliseconds(120))
        }
        // M = 3 pin mismatches, enforced: the handshake fails, the client gets 502.
        for _ in 0..<3 {
            metrics.pinValidation(host: api, result: .mismatchEnforced)
            metrics.upstreamHandshake(host: api, result: .pinMismatch, duration: .milliseconds(30))
            metrics.denied(reason: .pinMismatch)
            metrics.requestCompleted(host: api, code: 502, duration: .milliseconds(35))
        }
        // One host-denied CONNECT to a host no policy matches... tunnelled by default here,
        // so deny the configured one.
        metrics.denied(reason: .hostDenied)
        metrics.requestCompleted(host: HostLabel(store.snapshot.policy(forHost: "blocked.example.com")), code: 403, duration: .milliseconds(1))
        metrics.bytes(host: cdn, direction: .down, count: 5)
        metrics.clientConnections(delta: -2)
        metrics.mintedCertificate()
        // A token refresh.
        metrics.tokenRefresh(session: "app", result: .success)
        metrics.tokenExpiry(session: "app", at: MetricsFixture.now.addingTimeInterval(3600))
        // A reload that fails: the old policy keeps serving.
        try fixture.write(policies: "hosts:\n  - {match: api.example.com, action: sideways}\n")
        #expect(store.reload(trigger: .admin).metricLabel == "failure")

        let text = try PrometheusText(parsing: metrics.exposition())
        let p = "pinproxy_"
        #expect(text.value(p + "requests_total", ["host": "api.example.com", "code": "200"]) == 7)
        #expect(text.value(p + "requests_total", ["host": "api.example.com", "code": "502"]) == 3)
        #expect(text.value(p + "requests_total", ["host": "blocked.example.com", "code": "403"]) == 1)
        #expect(text.value(p + "request_duration_seconds_count", Self.api) == 10)
        #expect(text.value(p + "request_duration_seconds_bucket", ["host": "api.example.com", "le": "0.05"]) == 3)
        #expect(text.value(p + "request_duration_seconds_bucket", ["host": "api.example.com", "le": "0.25"]) == 10)
        #expect(text.value(p + "upstream_handshakes_total", ["host": "api.example.com", "result": "ok"]) == 7)
        #expect(text.value(p + "upstream_handshakes_total", ["host": "api.example.com", "result": "pin_mismatch"]) == 3)
        #expect(text.value(p + "upstream_handshakes_total", ["host": "api.example.com", "result": "timeout"]) == 0)
        #expect(text.value(p + "upstream_handshake_duration_seconds_count", Self.api) == 10)
        #expect(text.value(p + "pin_validations_total", ["host": "api.example.com", "result": "match"]) == 7)
        #expect(text.value(p + "pin_validations_total", ["host": "api.example.com", "result": "mismatch_enforced"]) == 3)
        #expect(text.value(p + "pin_validations_total", ["host": "api.example.com", "result": "mismatch_reported"]) == 0)
        #expect(text.value(p + "denied_total", ["reason": "pin_mismatch"]) == 3)
        #expect(text.value(p + "denied_total", ["reason": "host_denied"]) == 1)
        #expect(text.value(p + "denied_total", ["reason": "ssrf_blocked"]) == 0)
        #expect(text.value(p + "client_connections") == 5)
        #expect(text.value(p + "upstream_connections", Self.api) == 7)
        #expect(text.value(p + "bytes_total", ["host": "api.example.com", "direction": "up"]) == 700)
        #expect(text.value(p + "bytes_total", ["host": "api.example.com", "direction": "down"]) == 7000)
        #expect(text.value(p + "bytes_total", ["host": "*.cdn.example.com", "direction": "down"]) == 5)
        #expect(text.value(p + "minted_certificates_total") == 1)
        #expect(text.value(p + "token_refreshes_total", ["session": "app", "result": "success"]) == 1)
        #expect(text.value(p + "token_refreshes_total", ["session": "app", "result": "invalid_grant"]) == 0)
        #expect(text.value(p + "token_expiry_timestamp_seconds", ["session": "app"]) == MetricsFixture.now.timeIntervalSince1970 + 3600)
        #expect(text.value(p + "policy_reloads_total", ["result": "failure"]) == 1)
        #expect(text.value(p + "policy_reloads_total", ["result": "success"]) == 0)
        // Still the start's load: the failed reload did not move it.
        #expect(text.value(p + "policy_last_reload_success_timestamp_seconds") == MetricsFixture.now.timeIntervalSince1970)
        #expect(text.value(p + "build_info", ["version": "0.6.0-test"]) == 1)
        // The secret of the session is nowhere.
        #expect(!metrics.exposition().contains("s3cret"))
    }

    @Test func configuredSeriesExistAtZeroBeforeTraffic() throws {
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        let text = try PrometheusText(parsing: metrics.exposition())
        let p = "pinproxy_"

        for result in UpstreamHandshakeResult.allCases {
            #expect(text.value(p + "upstream_handshakes_total", ["host": "api.example.com", "result": result.rawValue]) == 0)
        }
        for result in PinValidationResult.allCases {
            #expect(text.value(p + "pin_validations_total", ["host": "api.example.com", "result": result.rawValue]) == 0)
        }
        for host in ["api.example.com", "*.cdn.example.com", "_none"] {
            for direction in ["up", "down"] {
                #expect(text.value(p + "bytes_total", ["host": host, "direction": direction]) == 0, "\(host) \(direction)")
            }
            #expect(text.value(p + "upstream_connections", ["host": host]) == 0)
            #expect(text.value(p + "request_duration_seconds_count", ["host": host]) == 0)
        }
        #expect(text.value(p + "upstream_handshake_duration_seconds_count", Self.api) == 0)
        for result in TokenRefreshResult.allCases {
            #expect(text.value(p + "token_refreshes_total", ["session": "app", "result": result.rawValue]) == 0)
        }
        for reason in RefusalCode.allCases {
            #expect(text.value(p + "denied_total", ["reason": reason.rawValue]) == 0)
        }
        #expect(text.value(p + "policy_reloads_total", ["result": "success"]) == 0)
        #expect(text.value(p + "policy_reloads_total", ["result": "failure"]) == 0)
        #expect(text.value(p + "client_connections") == 0)
        #expect(text.value(p + "minted_certificates_total") == 0)
        // A denied host has no traffic series; handshakes only where interception happens.
        #expect(text.matching(p + "bytes_total", ["host": "blocked.example.com"]).isEmpty)
        #expect(text.matching(p + "upstream_handshakes_total", ["host": "*.cdn.example.com"]).isEmpty)
        // The latest not_after among the active pins: 2027-06-01, its last instant.
        let expiry = DateText.parse("2027-06-01", bound: .end)!.timeIntervalSince1970
        #expect(text.value(p + "pin_expiry_timestamp_seconds", Self.api) == expiry)
        // Zero would mean failed / expired: absent until a real value arrives.
        #expect(text.matching(p + "probe_success").isEmpty)
        #expect(text.matching(p + "upstream_cert_expiry_timestamp_seconds").isEmpty)
        #expect(text.matching(p + "refresh_token_issued_timestamp_seconds").isEmpty)
        #expect(text.value(p + "policy_last_reload_success_timestamp_seconds") == MetricsFixture.now.timeIntervalSince1970)
        #expect(text.types[p + "request_duration_seconds"] == "histogram")
        #expect(text.types[p + "requests_total"] == nil || text.types[p + "requests_total"] == "counter")
    }

    @Test func successfulReloadPreparesNewHostsAndDropsGaugesOfRemovedOnes() throws {
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        metrics.observe(store) // a second observer would count every reload twice
        let api = try #require(store.snapshot.policy(forHost: "api.example.com")).hostLabel
        metrics.probe(host: api, success: true)
        metrics.upstreamCertExpiry(host: api, at: MetricsFixture.now.addingTimeInterval(86400 * 60))
        metrics.upstreamTLS(host: api, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256")

        try fixture.write(policies: """
            hosts:
              - {match: new.example.com, action: intercept}
            """)
        #expect(store.reload().metricLabel == "success")
        let text = try PrometheusText(parsing: metrics.exposition())
        let p = "pinproxy_"
        #expect(text.value(p + "policy_reloads_total", ["result": "success"]) == 1)
        #expect(text.value(p + "upstream_handshakes_total", ["host": "new.example.com", "result": "ok"]) == 0)
        #expect(text.value(p + "pin_validations_total", ["host": "new.example.com", "result": "unpinned"]) == 0)
        #expect(text.matching(p + "probe_success").isEmpty)
        #expect(text.matching(p + "upstream_cert_expiry_timestamp_seconds").isEmpty)
        #expect(text.matching(p + "upstream_tls_info").isEmpty)
        #expect(text.matching(p + "pin_expiry_timestamp_seconds").isEmpty)
        // Counters of the removed host keep their history.
        #expect(text.value(p + "upstream_handshakes_total", ["host": "api.example.com", "result": "ok"]) == 0)
    }

    @Test func tlsDowngradeShowsAsTheOnlyCurrentPair() throws {
        let metrics = PinproxyMetrics()
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let api = try #require(store.snapshot.policy(forHost: "api.example.com")).hostLabel
        metrics.upstreamTLS(host: api, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256")
        metrics.upstreamTLS(host: api, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256")
        metrics.upstreamTLS(host: .unmatched, version: "TLSv1.3", cipher: "TLS_AES_256_GCM_SHA384")
        metrics.upstreamTLS(host: api, version: "TLSv1.2", cipher: "ECDHE-RSA-AES128-GCM-SHA256")

        let text = try PrometheusText(parsing: metrics.exposition())
        let series = text.matching("pinproxy_upstream_tls_info", Self.api)
        #expect(series.count == 1)
        #expect(series.first?.labels["version"] == "TLSv1.2")
        #expect(series.first?.labels["cipher"] == "ECDHE-RSA-AES128-GCM-SHA256")
        #expect(series.first?.value == 1)
        #expect(text.value("pinproxy_upstream_tls_info", ["host": "_none"]) == 1)
    }

    @Test(arguments: [
        // (pins, expected value): none active → 0; coverage reaching an undated pin → +Inf; else where coverage ends.
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2026-01-01}]", 0.0),
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-01}, {pin: \"\(MetricsFixture.pin(2))\"}]", Double.infinity),
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-01}, {pin: \"\(MetricsFixture.pin(2))\", not_after: 2026-01-01}]",
         DateText.parse("2027-01-01", bound: .end)!.timeIntervalSince1970),
        // A staged rotation (A until T, B from T): coverage runs on to B's end, not T.
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-10}, {pin: \"\(MetricsFixture.pin(2))\", not_before: 2027-01-10, not_after: 2028-01-01}]",
         DateText.parse("2028-01-01", bound: .end)!.timeIntervalSince1970),
        // B starts the day after A's last: still no gap.
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-10}, {pin: \"\(MetricsFixture.pin(2))\", not_before: 2027-01-11, not_after: 2028-01-01}]",
         DateText.parse("2028-01-01", bound: .end)!.timeIntervalSince1970),
        // A gap of a day: coverage ends with A.
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-10}, {pin: \"\(MetricsFixture.pin(2))\", not_before: 2027-01-12, not_after: 2028-01-01}]",
         DateText.parse("2027-01-10", bound: .end)!.timeIntervalSince1970),
        // Handing over to an undated pin: coverage never ends.
        ("[{pin: \"\(MetricsFixture.pin(1))\", not_after: 2027-01-10}, {pin: \"\(MetricsFixture.pin(2))\", not_before: 2027-01-10}]", Double.infinity),
    ])
    func pinExpiryIsTheEndOfPinnedCoverage(pins: String, expected: Double) throws {
        let fixture = try MetricsFixture(main: "policies: policies\n", policies: """
            hosts:
              - match: api.example.com
                action: intercept
                pins: {on_expiry: chain_only, spki_sha256: \(pins)}
            """)
        let metrics = PinproxyMetrics()
        metrics.observe(try fixture.store())
        let text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_pin_expiry_timestamp_seconds", Self.api) == expected)
    }

    /// The learning phase (`mode: report`, no pin listed) exports no pin expiry,
    /// so `PinproxyPinSetExpiringSoon` stays quiet; pins added by a reload bring
    /// the series in, and an enforced empty set still exports 0 (issue 28 item 11).
    @Test func aPinSetEmptyByDesignExportsNoExpiry() throws {
        let fixture = try MetricsFixture(main: "policies: policies\n", policies: """
            hosts:
              - match: api.example.com
                action: intercept
                pins: {mode: report, spki_sha256: []}
            """)
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        metrics.updatePinExpiry(store.snapshot, now: MetricsFixture.now)
        var text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.matching("pinproxy_pin_expiry_timestamp_seconds").isEmpty, "\(text.matching("pinproxy_pin_expiry_timestamp_seconds"))")

        try fixture.write(policies: """
            hosts:
              - match: api.example.com
                action: intercept
                pins: {mode: report, spki_sha256: [{pin: "\(MetricsFixture.pin(1))"}]}
            """)
        #expect(store.reload().metricLabel == "success")
        text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_pin_expiry_timestamp_seconds", Self.api) == .infinity)

        try fixture.write(policies: """
            hosts:
              - match: api.example.com
                action: intercept
                pins: {mode: report, spki_sha256: []}
            """)
        #expect(store.reload().metricLabel == "success")
        metrics.updatePinExpiry(store.snapshot, now: MetricsFixture.now)
        text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.matching("pinproxy_pin_expiry_timestamp_seconds").isEmpty, "back in the learning phase")
    }

    @Test func statusCodesAreBounded() throws {
        let metrics = PinproxyMetrics()
        metrics.requestCompleted(host: .unmatched, code: 999, duration: .zero)
        metrics.requestCompleted(host: .unmatched, code: 12345, duration: .zero)
        let text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_requests_total", ["host": "_none", "code": "other"]) == 2)
    }

    /// `HostTraffic` keeps the series it used last: a change of status,
    /// client or protocol must still land in its own series, and the
    /// resolved histogram and byte counters are the host's.
    @Test func hostTrafficCountsInTheSeriesTheDirectCallsUse() throws {
        let metrics = PinproxyMetrics()
        let traffic = metrics.hostTraffic(.unmatched)
        let alice = ClientLabel("alice")
        for (code, client, proto) in [(200, ClientLabel.anonymous, RequestProtocol.http1), (200, .anonymous, .http1), (404, .anonymous, .http1),
                                      (200, alice, .http1), (200, alice, .h2), (200, .anonymous, .http1)] {
            traffic.requestCompleted(code: code, duration: .milliseconds(3), client: client, protocol: proto)
        }
        traffic.bytes(up: 10, down: 0)
        traffic.bytes(up: 0, down: 7)
        metrics.requestCompleted(host: .unmatched, code: 200, duration: .zero)  // the same series, by name
        let text = try PrometheusText(parsing: metrics.exposition())
        func requests(_ code: String, _ client: String, _ proto: String) -> Double? {
            text.value("pinproxy_requests_total", ["host": "_none", "code": code, "client": client, "protocol": proto])
        }
        #expect(requests("200", "_anonymous", "http1") == 4)
        #expect(requests("404", "_anonymous", "http1") == 1)
        #expect(requests("200", "alice", "http1") == 1)
        #expect(requests("200", "alice", "h2") == 1)
        #expect(text.value("pinproxy_request_duration_seconds_count", ["host": "_none"]) == 7)
        #expect(text.value("pinproxy_bytes_total", ["host": "_none", "direction": "up"]) == 10)
        #expect(text.value("pinproxy_bytes_total", ["host": "_none", "direction": "down"]) == 7)
    }

    /// As `bytes` itself: a host whose requests moved no byte (refusals only)
    /// gets no byte series from `HostTraffic` either.
    @Test func hostTrafficMakesNoByteSeriesBeforeTheFirstByte() throws {
        let metrics = PinproxyMetrics()
        let traffic = metrics.hostTraffic(.unmatched)
        traffic.requestCompleted(code: 403, duration: .zero, client: .anonymous, protocol: .http1)
        traffic.bytes(up: 0, down: 0)
        let text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_requests_total", ["host": "_none", "code": "403"]) == 1)
        #expect(text.value("pinproxy_bytes_total", ["host": "_none", "direction": "up"]) == nil)
        #expect(text.value("pinproxy_bytes_total", ["host": "_none", "direction": "down"]) == nil)
    }
}
