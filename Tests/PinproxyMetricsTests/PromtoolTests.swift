import Foundation
import PinproxyMetrics
import PinproxyTestSupport
import Testing

/// The exposition and the shipped alert rules, as Prometheus's own tool sees them.
@Suite(.blockingWaits, .enabled(if: Promtool.path != nil, Promtool.missingMessage))
struct PromtoolTests {
    @Test func expositionPassesPromtoolCheckMetrics() throws {
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        metrics.buildInfo(version: "0.6.0")
        let api = try #require(store.snapshot.policy(forHost: "api.example.com")).hostLabel
        metrics.requestCompleted(host: api, code: 200, duration: .milliseconds(12))
        metrics.upstreamHandshake(host: api, result: .ok, duration: .milliseconds(8))
        metrics.upstreamTLS(host: api, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256")
        metrics.upstreamCertExpiry(host: api, at: Date(timeIntervalSince1970: 1_800_000_000))
        metrics.probe(host: api, success: true)
        metrics.tokenRefresh(session: "app", result: .rateLimited)
        metrics.refreshTokenIssued(session: "app", at: Date(timeIntervalSince1970: 1_790_000_000))
        metrics.swapRequest(endpoint: .swap, result: .success)
        metrics.policyReload(result: .success, at: Date(timeIntervalSince1970: 1_795_000_000))
        // The standard process families (issue 28 item 19): present on Linux, and lint-clean.
        metrics.updateProcess()
        #expect(metrics.exposition().contains("\nprocess_resident_memory_bytes "), "read from /proc/self")
        #expect(metrics.exposition().contains("# TYPE process_cpu_seconds_total counter"))

        let (status, output) = try ChildProcess.run(Promtool.path!, ["check", "metrics"], input: metrics.exposition())
        #expect(status == 0, "promtool check metrics:\n\(output)")
        // Lint findings (naming, units) are printed even with status 0.
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool lint:\n\(output)")
    }

    @Test func alertRulesPassPromtoolCheckAndUnitTests() throws {
        let directory = Promtool.repositoryRoot + "/examples/prometheus"
        let check = try ChildProcess.run(Promtool.path!, ["check", "rules", directory + "/alerts.yml"])
        #expect(check.status == 0, "promtool check rules:\n\(check.output)")
        let config = try ChildProcess.run(Promtool.path!, ["check", "config", "--syntax-only", directory + "/prometheus.yml"])
        #expect(config.status == 0, "promtool check config:\n\(config.output)")
        let tests = try ChildProcess.run(Promtool.path!, ["test", "rules", directory + "/alerts.test.yml"])
        #expect(tests.status == 0, "promtool test rules:\n\(tests.output)")
    }
}
