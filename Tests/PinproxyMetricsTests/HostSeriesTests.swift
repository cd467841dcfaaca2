import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyMetrics

/// The request path's series are resolved once per host label for the
/// process (issue 33): every connection, stream and direct call of one host
/// counts through the same handles, a host's series appear only when first
/// used, and a gauge removed at a reload comes back as a new series.
struct HostSeriesTests {
    @Test func aHostsSeriesAreResolvedOnceForTheProcess() {
        let metrics = PinproxyMetrics()
        let api = HostLabel(try! HostPattern(parsing: "api.example.com"))
        let series = metrics.series(api)
        #expect(metrics.series(api) === series)
        #expect(metrics.series(.unmatched) !== series)
        #expect(metrics.series(api).duration === series.duration)
        #expect(series.upstreamStreams === metrics.series(api).upstreamStreams)
        #expect(series.requests(code: 200, client: .anonymous, protocol: .h2)
                === metrics.series(api).requests(code: 200, client: .anonymous, protocol: .h2))
        // Threads racing for a new host all get the one kept.
        let fresh = HostLabel(try! HostPattern(parsing: "fresh.example.com"))
        let seen = Seen()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            seen.add(ObjectIdentifier(metrics.series(fresh)))
        }
        #expect(seen.distinct == 1)
    }

    @Test func connectionsStreamsAndDirectCallsOfAHostCountInOneSeries() throws {
        let metrics = PinproxyMetrics()
        let first = metrics.hostTraffic(.unmatched)
        let second = metrics.hostTraffic(.unmatched)
        first.requestCompleted(code: 200, duration: .milliseconds(1), client: .anonymous, protocol: .http1)
        second.requestCompleted(code: 200, duration: .milliseconds(1), client: .anonymous, protocol: .http1)
        second.requestCompleted(code: 777, duration: .zero, client: .anonymous, protocol: .http1)
        metrics.requestCompleted(host: .unmatched, code: 1_000, duration: .zero)
        metrics.upstreamStreams(host: .unmatched, delta: 1)
        metrics.upstreamStreams(host: .unmatched, delta: 1)
        metrics.upstreamStreams(host: .unmatched, delta: -1)
        metrics.upstreamConnections(host: .unmatched, delta: 1)
        metrics.clientConnections(delta: 1)
        metrics.clientConnections(delta: 1)
        metrics.clientConnections(delta: -1)
        let text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_requests_total", ["host": "_none", "code": "200"]) == 2)
        #expect(text.value("pinproxy_requests_total", ["host": "_none", "code": "other"]) == 2)
        #expect(text.value("pinproxy_request_duration_seconds_count", ["host": "_none"]) == 4)
        #expect(text.value("pinproxy_upstream_streams", ["host": "_none"]) == 1)
        #expect(text.value("pinproxy_upstream_connections", ["host": "_none"]) == 1)
        #expect(text.value("pinproxy_client_connections") == 1)
    }

    @Test func aRemovedGaugeComesBackAsANewSeries() throws {
        let metrics = PinproxyMetrics()
        let api = HostLabel(try! HostPattern(parsing: "api.example.com"))
        metrics.probe(host: api, success: true)
        metrics.removeGauge(.probeSuccess, [api.value])
        #expect(try PrometheusText(parsing: metrics.exposition()).matching("pinproxy_probe_success").isEmpty)
        metrics.probe(host: api, success: false)
        let text = try PrometheusText(parsing: metrics.exposition())
        #expect(text.value("pinproxy_probe_success", ["host": "api.example.com"]) == 0)
        // A gauge never cached is removed too (a reload drops a host's expiry before anything read it).
        metrics.removeGauge(.probeSuccess, ["never.example.com"])
        #expect(try PrometheusText(parsing: metrics.exposition()).matching("pinproxy_probe_success", ["host": "never.example.com"]).isEmpty)
    }
}

/// Identities collected from several threads.
private final class Seen: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var ids: Set<ObjectIdentifier> = []

    func add(_ id: ObjectIdentifier) {
        lock.lock()
        ids.insert(id)
        lock.unlock()
    }

    var distinct: Int {
        lock.lock()
        defer { lock.unlock() }
        return ids.count
    }
}
