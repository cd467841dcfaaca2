import PinproxyPolicy
import Foundation

/// The request path: requests, refusals, connections, bytes.
extension PinproxyMetrics {
    /// One answered request (refusals included, docs/contract.md §10): its status and
    /// the time from its head to the end of the response.
    /// `protocol` is the app's HTTP version: `http1` or `h2` (docs/contract.md §11).
    public func requestCompleted(host: HostLabel, code: Int, duration: Duration, client: ClientLabel = .anonymous,
                                 protocol: RequestProtocol = .http1) {
        let resolved = series(host)
        resolved.requests(code: code, client: client, protocol: `protocol`).increment()
        resolved.duration.record(duration)
    }

    /// One refusal, by its docs/contract.md §4 code. Count the answer itself with
    /// `requestCompleted` too.
    public func denied(reason: RefusalCode, client: ClientLabel = .anonymous) {
        counter(.denied, reason.rawValue, client.value).increment()
    }

    /// A failed proxy login (docs/contract.md §15), by the identity it named.
    public func proxyAuthFailed(client: ClientLabel) {
        counter(.proxyAuthFailures, client.value).increment()
    }

    /// One response cut short after its head had reached the app: the app's
    /// connection was closed, so it never takes a partial body for a whole one.
    public func responseCut(host: HostLabel, reason: ResponseCutReason) {
        counter(.responsesCut, host.value, reason.rawValue).increment()
    }

    /// An upstream answer that broke HTTP's framing, dropped rather than passed on.
    public func upstreamViolation(host: HostLabel, kind: UpstreamViolation) {
        counter(.upstreamViolations, host.value, kind.rawValue).increment()
    }

    /// One app's TLS handshake with an interception certificate.
    public func clientHandshake(result: ClientHandshakeResult) {
        counter(.clientHandshakes, result.rawValue).increment()
    }

    /// A client connection opened (+1) or closed (-1).
    public func clientConnections(delta: Int) {
        clientConnectionsGauge.increment(by: Double(delta))
    }

    /// An upstream connection opened (+1) or closed (-1).
    public func upstreamConnections(host: HostLabel, delta: Int) {
        series(host).upstreamConnections.increment(by: Double(delta))
    }

    /// An upstream HTTP/2 stream opened (+1) or ended (-1).
    public func upstreamStreams(host: HostLabel, delta: Int) {
        series(host).upstreamStreams.increment(by: Double(delta))
    }

    /// Payload bytes relayed in one direction (call per chunk or per connection).
    public func bytes(host: HostLabel, direction: TrafficDirection, count: Int) {
        guard count > 0 else { return }
        series(host).bytes(direction).increment(by: Int64(count))
    }

    /// HTTP statuses are three digits; anything else an upstream sends is
    /// folded into one value so it cannot grow the series count.
    static func statusLabel(_ code: Int) -> String {
        (100...599).contains(code) ? String(code) : "other"
    }
}
