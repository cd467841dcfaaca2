import PinproxyPolicy
import Foundation

/// The request path: requests, refusals, connections, bytes.
extension PinproxyMetrics {
    /// One answered request (refusals included, docs/contract.md §10): its status and
    /// the time from its head to the end of the response.
    public func requestCompleted(host: HostLabel, code: Int, duration: Duration, client: ClientLabel = .anonymous) {
        counter(.requests, host.value, Self.statusLabel(code), client.value).increment()
        histogram(.requestDuration, buckets: Buckets.request, host.value).record(duration)
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

    /// One app's TLS handshake with an interception certificate.
    public func clientHandshake(result: ClientHandshakeResult) {
        counter(.clientHandshakes, result.rawValue).increment()
    }

    /// A client connection opened (+1) or closed (-1).
    public func clientConnections(delta: Int) {
        gauge(.clientConnections).increment(by: Double(delta))
    }

    /// An upstream connection opened (+1) or closed (-1).
    public func upstreamConnections(host: HostLabel, delta: Int) {
        gauge(.upstreamConnections, host.value).increment(by: Double(delta))
    }

    /// Payload bytes relayed in one direction (call per chunk or per connection).
    public func bytes(host: HostLabel, direction: TrafficDirection, count: Int) {
        guard count > 0 else { return }
        counter(.bytes, host.value, direction.rawValue).increment(by: Int64(count))
    }

    /// HTTP statuses are three digits; anything else an upstream sends is
    /// folded into one value so it cannot grow the series count.
    static func statusLabel(_ code: Int) -> String {
        (100...599).contains(code) ? String(code) : "other"
    }
}
