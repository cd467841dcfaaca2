import Foundation
import PinproxyMetrics
import PinproxyPolicy

/// The proxy's reports, as Prometheus metrics (docs/contract.md §6).
public struct MetricsInstrumentation: ProxyInstrumentation {
    let metrics: PinproxyMetrics

    public init(_ metrics: PinproxyMetrics) {
        self.metrics = metrics
    }

    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String, protocol: RequestProtocol) {
        metrics.requestCompleted(host: HostLabel(policy), code: status, duration: .seconds(seconds), client: ClientLabel(client),
                                 protocol: `protocol`)
    }

    public func trafficRecorder(policy: HostPolicy?) -> any TrafficRecorder {
        MetricsTrafficRecorder(metrics.hostTraffic(HostLabel(policy)))
    }

    public func upstreamStreams(policy: HostPolicy?, delta: Int) {
        metrics.upstreamStreams(host: HostLabel(policy), delta: delta)
    }

    public func denied(code: ProxyError.Code, client: String) {
        metrics.denied(reason: code, client: ClientLabel(client))
    }

    public func proxyAuthFailed(client: String) {
        metrics.proxyAuthFailed(client: ClientLabel(client))
    }

    public func responseCut(policy: HostPolicy?, reason: ResponseCutReason) {
        metrics.responseCut(host: HostLabel(policy), reason: reason)
    }

    public func upstreamViolation(policy: HostPolicy?, kind: UpstreamViolation) {
        metrics.upstreamViolation(host: HostLabel(policy), kind: kind)
    }

    public func idleClosed(policy: HostPolicy?, kind: IdleCloseKind) {
        metrics.idleClosed(host: HostLabel(policy), kind: kind)
    }

    public func upstreamHandshake(policy: HostPolicy?, result: UpstreamHandshakeResult, seconds: Double) {
        metrics.upstreamHandshake(host: HostLabel(policy), result: result, duration: .seconds(seconds))
    }

    public func upstreamTLS(policy: HostPolicy?, version: String, cipher: String, leafNotAfter: Date?) {
        metrics.upstreamTLS(host: HostLabel(policy), version: version, cipher: cipher)
        if let leafNotAfter { metrics.upstreamCertExpiry(host: HostLabel(policy), at: leafNotAfter) }
    }

    public func pinValidation(policy: HostPolicy?, verdict: PinVerdict) {
        metrics.pinValidation(host: HostLabel(policy), verdict: verdict)
    }

    public func clientConnections(delta: Int) {
        metrics.clientConnections(delta: delta)
    }

    public func upstreamConnections(policy: HostPolicy?, delta: Int) {
        metrics.upstreamConnections(host: HostLabel(policy), delta: delta)
    }

    public func bytes(policy: HostPolicy?, up: Int, down: Int) {
        if up > 0 { metrics.bytes(host: HostLabel(policy), direction: .up, count: up) }
        if down > 0 { metrics.bytes(host: HostLabel(policy), direction: .down, count: down) }
    }

    public func mintedCertificate() {
        metrics.mintedCertificate()
    }

    public func clientHandshake(_ result: ClientHandshakeResult) {
        metrics.clientHandshake(result: result)
    }

    public func probe(policy: HostPolicy, success: Bool) {
        metrics.probe(host: HostLabel(policy), success: success)
    }
}

/// A policy's request and byte series, looked up once (`HostTraffic`).
final class MetricsTrafficRecorder: TrafficRecorder {
    private let traffic: HostTraffic

    init(_ traffic: HostTraffic) {
        self.traffic = traffic
    }

    func requestCompleted(status: Int, seconds: Double, client: String, protocol: RequestProtocol) {
        traffic.requestCompleted(code: status, duration: .seconds(seconds), client: ClientLabel(client), protocol: `protocol`)
    }

    func bytes(up: Int, down: Int) {
        traffic.bytes(up: up, down: down)
    }

    func upstreamStreams(delta: Int) {
        traffic.upstreamStreams(delta: delta)
    }
}
