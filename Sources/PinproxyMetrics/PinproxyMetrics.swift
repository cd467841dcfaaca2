import PinproxyPolicy
import Foundation
import NIOConcurrencyHelpers
import Prometheus

/// Every metric of docs/contract.md §6, one typed method each, on a registry of its own.
///
/// Callers never spell a metric name or a label: hosts come as `HostLabel`
/// (a policy's pattern or `_none`), results and reasons as enums, so the
/// series count is bounded by the configuration, not by traffic. Each
/// instance owns its `PrometheusCollectorRegistry` (no global
/// `MetricsSystem.bootstrap`), so tests and embedders can hold several.
///
/// Every method is thread-safe and cheap (one registry lookup under a lock,
/// then an atomic), fit for the request path on any event loop.
public final class PinproxyMetrics: Sendable {
    /// The underlying registry, for embedders that add their own collectors.
    public let registry: PrometheusCollectorRegistry

    struct State {
        /// Hosts prepared by the last `prepare(snapshot)`: gauges of hosts no
        /// longer configured are removed, so their alerts stop firing.
        var hosts: Set<String> = []
        /// The version and cipher each host last negotiated (`upstream_tls_info`).
        var tls: [String: TLSPair] = [:]
        /// Stores already observed, so a second `observe` does not count twice.
        var observedStores: Set<ObjectIdentifier> = []
        /// CPU seconds already added to `process_cpu_seconds_total`.
        var processCPUSeconds: Double = 0
    }

    struct TLSPair: Hashable {
        var version: String
        var cipher: String
    }

    let state = NIOLockedValueBox(State())

    /// Counters and histograms by family and label values. The registry
    /// validates names, labels and help text on every lookup; these series
    /// are never removed, so the request path looks them up here instead.
    private let counters = NIOLockedValueBox([SeriesKey: Counter]())
    private let histograms = NIOLockedValueBox([SeriesKey: DurationHistogram]())
    /// Gauges likewise; `removeGauge` takes a removed series out of here too,
    /// so a series made again later is a new one, as the registry's is.
    private let gauges = NIOLockedValueBox([SeriesKey: Gauge]())
    /// Each host label's request-path series (`HostSeries`), made at first use.
    private let hosts = NIOLockedValueBox([String: HostSeries]())
    /// `client_connections`: moved twice per app connection.
    let clientConnectionsGauge: Gauge

    struct SeriesKey: Hashable {
        var family: String
        var labels: [String]
    }

    /// Creates the process-wide series at 0: client connections, minted
    /// certificates, every refusal reason and both reload outcomes.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        clientConnectionsGauge = registry.makeGauge(descriptor: MetricFamily.clientConnections.descriptor)
        clientConnectionsGauge.set(to: 0)
        counter(.mintedCertificates).increment(by: Int64(0))
        for result in [ClientHandshakeResult.ok, .untrustedCA] { counter(.clientHandshakes, result.rawValue).increment(by: Int64(0)) }
        for reason in RefusalCode.allCases { counter(.denied, reason.rawValue, ClientLabel.anonymous.value).increment(by: Int64(0)) }
        for result in ["success", "failure"] { counter(.policyReloads, result).increment(by: Int64(0)) }
    }

    /// The registry in Prometheus text format 0.0.4, families sorted by name
    /// (the registry emits them in hash order; sorted output diffs well).
    public func exposition() -> String {
        Self.sortedFamilies(registry.emitToString())
    }

    /// The content type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    // MARK: Registry access

    func counter(_ family: MetricFamily, _ labels: String...) -> Counter {
        let key = SeriesKey(family: family.name, labels: labels)
        if let cached = counters.withLockedValue({ $0[key] }) { return cached }
        let made = labels.isEmpty
            ? registry.makeCounter(descriptor: family.descriptor)
            : registry.makeCounter(descriptor: family.descriptor, labels: family.labelPairs(labels))
        counters.withLockedValue { $0[key] = made }
        return made
    }

    func gauge(_ family: MetricFamily, _ labels: String...) -> Gauge {
        gauge(family, labels)
    }

    func gauge(_ family: MetricFamily, _ labels: [String]) -> Gauge {
        let key = SeriesKey(family: family.name, labels: labels)
        if let cached = gauges.withLockedValue({ $0[key] }) { return cached }
        let made = makeGauge(family, labels)
        gauges.withLockedValue { $0[key] = made }
        return made
    }

    private func makeGauge(_ family: MetricFamily, _ labels: [String]) -> Gauge {
        labels.isEmpty
            ? registry.makeGauge(descriptor: family.descriptor)
            : registry.makeGauge(descriptor: family.descriptor, labels: family.labelPairs(labels))
    }

    /// The request-path series of `host`, resolved once for the process.
    func series(_ host: HostLabel) -> HostSeries {
        if let known = hosts.withLockedValue({ $0[host.value] }) { return known }
        let made = HostSeries(metrics: self, host: host)
        return hosts.withLockedValue { hosts in
            // A racing thread's is kept, so everyone counts through one.
            if let raced = hosts[host.value] { return raced }
            hosts[host.value] = made
            return made
        }
    }

    func histogram(_ family: MetricFamily, buckets: [Duration], _ labels: String...) -> DurationHistogram {
        let key = SeriesKey(family: family.name, labels: labels)
        if let cached = histograms.withLockedValue({ $0[key] }) { return cached }
        let made = registry.makeDurationHistogram(
            descriptor: family.descriptor, labels: family.labelPairs(labels), buckets: buckets)
        histograms.withLockedValue { $0[key] = made }
        return made
    }

    /// Removes one gauge series (a host that is no longer configured, a TLS
    /// pair that is no longer current).
    func removeGauge(_ family: MetricFamily, _ labels: [String]) {
        let key = SeriesKey(family: family.name, labels: labels)
        let cached = gauges.withLockedValue { $0.removeValue(forKey: key) }
        registry.unregisterGauge(cached ?? makeGauge(family, labels))
    }

    static func seconds(_ date: Date) -> Double { date.timeIntervalSince1970 }

    /// Reorders whole families (a `# HELP`/`# TYPE` header and its samples)
    /// by name; samples inside a family keep their order.
    static func sortedFamilies(_ text: String) -> String {
        var families: [(name: String, lines: [Substring])] = []
        var headerOpen = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# ") {
                let name = line.split(separator: " ", maxSplits: 3).dropFirst(2).first.map(String.init) ?? ""
                if !headerOpen || families.last?.name != name {
                    families.append((name, []))
                }
                headerOpen = true
            } else {
                headerOpen = false
                if families.isEmpty { families.append(("", [])) }
            }
            families[families.count - 1].lines.append(line)
        }
        return families.sorted { $0.name < $1.name }
            .map { $0.lines.joined(separator: "\n") + "\n" }
            .joined()
    }
}
