import NIOConcurrencyHelpers
import Prometheus

/// The series of one `host` label, resolved once for the life of the
/// process: `PinproxyMetrics` keeps one per label (a policy's pattern or
/// `_none`), so a new connection, a new HTTP/2 stream or a new upstream
/// connection finds its handles with one dictionary lookup, without building
/// label arrays or asking the registry again (issue 33: the registry
/// validates names and labels on every lookup). These series are never
/// removed (only expiry, probe and TLS-pair gauges are, and those are not
/// here), so a handle kept here never goes stale across a reload.
///
/// Each handle is resolved at its first use, as the direct calls did: a host
/// that only ever had refusals gets no byte or upstream series.
final class HostSeries: Sendable {
    let host: HostLabel
    /// Never outlived: `PinproxyMetrics` keeps this, and every `HostTraffic`
    /// that uses it holds the metrics too.
    private unowned let metrics: PinproxyMetrics
    private let resolved = NIOLockedValueBox(Resolved())

    struct Resolved {
        var duration: DurationHistogram?
        var bytesUp: Counter?
        var bytesDown: Counter?
        var upstreamConnections: Gauge?
        var upstreamStreams: Gauge?
        /// `requests_total` by status, client and protocol (the `host` is this one).
        var requests: [RequestKey: Counter] = [:]
    }

    struct RequestKey: Hashable {
        /// The status, or 0 for anything outside 100–599 (one `other` series).
        var code: Int
        var client: String
        var `protocol`: RequestProtocol
    }

    init(metrics: PinproxyMetrics, host: HostLabel) {
        self.metrics = metrics
        self.host = host
    }

    var duration: DurationHistogram {
        resolve(\.duration) { $0.histogram(.requestDuration, buckets: Buckets.request, self.host.value) }
    }

    var upstreamConnections: Gauge {
        resolve(\.upstreamConnections) { $0.gauge(.upstreamConnections, self.host.value) }
    }

    var upstreamStreams: Gauge {
        resolve(\.upstreamStreams) { $0.gauge(.upstreamStreams, self.host.value) }
    }

    func bytes(_ direction: TrafficDirection) -> Counter {
        switch direction {
        case .up: return resolve(\.bytesUp) { $0.counter(.bytes, self.host.value, TrafficDirection.up.rawValue) }
        case .down: return resolve(\.bytesDown) { $0.counter(.bytes, self.host.value, TrafficDirection.down.rawValue) }
        }
    }

    func requests(code: Int, client: ClientLabel, protocol: RequestProtocol) -> Counter {
        let key = RequestKey(code: (100...599).contains(code) ? code : 0, client: client.value, protocol: `protocol`)
        if let known = resolved.withLockedValue({ $0.requests[key] }) { return known }
        let made = metrics.counter(.requests, host.value, PinproxyMetrics.statusLabel(code), client.value, `protocol`.rawValue)
        resolved.withLockedValue { $0.requests[key] = made }
        return made
    }

    /// The handle in `slot`, asked of the registry the first time. Two
    /// threads racing here get the same handle: the registry returns the
    /// series it already has.
    private func resolve<Handle>(_ slot: WritableKeyPath<Resolved, Handle?>, _ make: (PinproxyMetrics) -> Handle) -> Handle {
        if let known = resolved.withLockedValue({ $0[keyPath: slot] }) { return known }
        let made = make(metrics)
        resolved.withLockedValue { $0[keyPath: slot] = made }
        return made
    }
}
