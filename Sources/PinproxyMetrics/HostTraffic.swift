import Prometheus

/// The series one host's requests are counted in, kept by whoever counts
/// many requests for that host (an app's connection, an HTTP/2 stream): a
/// request then costs no dictionary lookup, no lock and no label array. Its
/// handles come from the host's `HostSeries`, which the metrics resolved
/// once for the process, so making one (per connection) asks no registry.
/// Used by one thread at a time (an event loop), like the connection that
/// keeps it.
public final class HostTraffic {
    /// Holds the metrics alive for `series` (which refers to them unowned).
    private let metrics: PinproxyMetrics
    private let series: HostSeries
    private let duration: DurationHistogram
    /// Looked up at the first byte, as `PinproxyMetrics.bytes` does: a host
    /// that only ever had refusals gets no byte series (a denied host's
    /// exposition stays as it was).
    private var bytesUp: Counter?
    private var bytesDown: Counter?
    /// Looked up at the first stream: only an HTTP/2 upstream has streams.
    private var upstreamStreams: Gauge?
    /// The `requests_total` series used last: one connection's requests
    /// mostly share their status, client and protocol.
    private var last: (code: Int, client: ClientLabel, h2: Bool, counter: Counter)?

    init(metrics: PinproxyMetrics, series: HostSeries) {
        self.metrics = metrics
        self.series = series
        duration = series.duration
    }

    /// As `PinproxyMetrics.requestCompleted`, for this host.
    public func requestCompleted(code: Int, duration: Duration, client: ClientLabel, protocol: RequestProtocol) {
        let h2 = `protocol` == .h2
        let counter: Counter
        // The fields are compared where `last` holds them: the tuple bound
        // to a name was a copy, a second retain of a counter every loop shares.
        if let cached = last?.counter, last!.code == code, last!.h2 == h2, last!.client == client {
            counter = cached
        } else {
            counter = series.requests(code: code, client: client, protocol: `protocol`)
            last = (code, client, h2, counter)
        }
        counter.increment()
        self.duration.record(duration)
    }

    /// As `PinproxyMetrics.upstreamStreams`, for this host.
    public func upstreamStreams(delta: Int) {
        if upstreamStreams == nil { upstreamStreams = series.upstreamStreams }
        upstreamStreams!.increment(by: Double(delta))
    }

    /// As `PinproxyMetrics.bytes`, both directions at once.
    public func bytes(up: Int, down: Int) {
        if up > 0 {
            if bytesUp == nil { bytesUp = series.bytes(.up) }
            bytesUp!.increment(by: Int64(up))
        }
        if down > 0 {
            if bytesDown == nil { bytesDown = series.bytes(.down) }
            bytesDown!.increment(by: Int64(down))
        }
    }
}

extension PinproxyMetrics {
    /// The series of `host`'s requests, for a caller that keeps them.
    public func hostTraffic(_ host: HostLabel) -> HostTraffic {
        HostTraffic(metrics: self, series: series(host))
    }
}
