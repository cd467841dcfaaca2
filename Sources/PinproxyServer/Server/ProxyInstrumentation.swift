import Foundation
import PinproxyMetrics
import PinproxyPolicy

/// What the proxy reports as it works; metrics implement it (docs/contract.md §6). The
/// request path calls these without knowing metric names or label rules.
/// Hosts are given as the policy that matched (nil: none), so a metric label
/// can only ever be a policy's pattern or `_none`, never a client's name.
public protocol ProxyInstrumentation: Sendable {
    /// `client`: a configured identity name or `_anonymous` (docs/contract.md §15);
    /// `protocol`: the app's HTTP version, `http1` or `h2` (docs/contract.md §11).
    func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String, protocol: RequestProtocol)
    /// `requestCompleted` and `bytes` for one policy, resolved once (see `TrafficRecorder`).
    func trafficRecorder(policy: HostPolicy?) -> any TrafficRecorder
    func denied(code: ProxyError.Code, client: String)
    /// A failed proxy login, under the identity it named (`_unknown` when not configured).
    func proxyAuthFailed(client: String)
    /// An upstream HTTP/2 stream opened (+1) or ended (-1).
    func upstreamStreams(policy: HostPolicy?, delta: Int)
    func upstreamHandshake(policy: HostPolicy?, result: UpstreamHandshakeResult, seconds: Double)
    func upstreamTLS(policy: HostPolicy?, version: String, cipher: String, leafNotAfter: Date?)
    func pinValidation(policy: HostPolicy?, verdict: PinVerdict)
    func clientConnections(delta: Int)
    func upstreamConnections(policy: HostPolicy?, delta: Int)
    func bytes(policy: HostPolicy?, up: Int, down: Int)
    func mintedCertificate()
    func clientHandshake(_ result: ClientHandshakeResult)
    func probe(policy: HostPolicy, success: Bool)
    /// A response cut short after its head had gone to the app.
    func responseCut(policy: HostPolicy?, reason: ResponseCutReason)
    /// An upstream answer that broke HTTP's framing and was not passed on.
    func upstreamViolation(policy: HostPolicy?, kind: UpstreamViolation)
    /// A tunnel or WebSocket splice closed after `limits.idle_timeout` without a byte.
    func idleClosed(policy: HostPolicy?, kind: IdleCloseKind)
}

extension ProxyInstrumentation {
    public func responseCut(policy: HostPolicy?, reason: ResponseCutReason) {}
    public func upstreamViolation(policy: HostPolicy?, kind: UpstreamViolation) {}
    public func idleClosed(policy: HostPolicy?, kind: IdleCloseKind) {}
}

/// Reports nothing (tests, and commands that do not serve).
public struct NoInstrumentation: ProxyInstrumentation {
    public init() {}
    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String, protocol: RequestProtocol) {}
    public func upstreamStreams(policy: HostPolicy?, delta: Int) {}
    public func denied(code: ProxyError.Code, client: String) {}
    public func proxyAuthFailed(client: String) {}
    public func upstreamHandshake(policy: HostPolicy?, result: UpstreamHandshakeResult, seconds: Double) {}
    public func upstreamTLS(policy: HostPolicy?, version: String, cipher: String, leafNotAfter: Date?) {}
    public func pinValidation(policy: HostPolicy?, verdict: PinVerdict) {}
    public func clientConnections(delta: Int) {}
    public func upstreamConnections(policy: HostPolicy?, delta: Int) {}
    public func bytes(policy: HostPolicy?, up: Int, down: Int) {}
    public func mintedCertificate() {}
    public func clientHandshake(_ result: ClientHandshakeResult) {}
    public func probe(policy: HostPolicy, success: Bool) {}
}

extension ProxyInstrumentation {
    /// For callers that know no client (before a request, anonymous by definition)
    /// and no HTTP version yet (refusals before any HTTP/2 session exists).
    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double) {
        requestCompleted(policy: policy, status: status, seconds: seconds, client: ClientPrincipal.metricLabelAnonymous, protocol: .http1)
    }

    public func denied(code: ProxyError.Code) {
        denied(code: code, client: ClientPrincipal.metricLabelAnonymous)
    }
}

/// The counting of one policy's requests and bytes, resolved once: the
/// exchange handler keeps one for as long as its connection's requests go to
/// the same policy, so a request costs no metric lookup.
public protocol TrafficRecorder: AnyObject {
    func requestCompleted(status: Int, seconds: Double, client: String, protocol: RequestProtocol)
    func bytes(up: Int, down: Int)
    /// An upstream HTTP/2 stream opened (+1) or ended (-1): an upstream
    /// connection keeps a recorder for its streams (`UpstreamMultiplexer`).
    func upstreamStreams(delta: Int)
}

extension ProxyInstrumentation {
    /// Reports through `requestCompleted` and `bytes` (instrumentations with
    /// nothing to resolve, such as the tests' recorders).
    public func trafficRecorder(policy: HostPolicy?) -> any TrafficRecorder {
        ForwardingTrafficRecorder(instrumentation: self, policy: policy)
    }
}

final class ForwardingTrafficRecorder: TrafficRecorder {
    let instrumentation: any ProxyInstrumentation
    let policy: HostPolicy?

    init(instrumentation: any ProxyInstrumentation, policy: HostPolicy?) {
        self.instrumentation = instrumentation
        self.policy = policy
    }

    func requestCompleted(status: Int, seconds: Double, client: String, protocol: RequestProtocol) {
        instrumentation.requestCompleted(policy: policy, status: status, seconds: seconds, client: client, protocol: `protocol`)
    }

    func bytes(up: Int, down: Int) {
        instrumentation.bytes(policy: policy, up: up, down: down)
    }

    func upstreamStreams(delta: Int) {
        instrumentation.upstreamStreams(policy: policy, delta: delta)
    }
}
