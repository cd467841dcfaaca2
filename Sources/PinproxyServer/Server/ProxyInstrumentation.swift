import Foundation
import PinproxyMetrics
import PinproxyPolicy

/// What the proxy reports as it works; metrics implement it (docs/contract.md §6). The
/// request path calls these without knowing metric names or label rules.
/// Hosts are given as the policy that matched (nil: none), so a metric label
/// can only ever be a policy's pattern or `_none`, never a client's name.
public protocol ProxyInstrumentation: Sendable {
    /// `client`: a configured identity name or `_anonymous` (docs/contract.md §15).
    func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String)
    func denied(code: ProxyError.Code, client: String)
    /// A failed proxy login, under the identity it named (`_unknown` when not configured).
    func proxyAuthFailed(client: String)
    func upstreamHandshake(policy: HostPolicy?, result: UpstreamHandshakeResult, seconds: Double)
    func upstreamTLS(policy: HostPolicy?, version: String, cipher: String, leafNotAfter: Date?)
    func pinValidation(policy: HostPolicy?, verdict: PinVerdict)
    func clientConnections(delta: Int)
    func upstreamConnections(policy: HostPolicy?, delta: Int)
    func bytes(policy: HostPolicy?, up: Int, down: Int)
    func mintedCertificate()
    func clientHandshake(_ result: ClientHandshakeResult)
    func probe(policy: HostPolicy, success: Bool)
}

/// Reports nothing (tests, and commands that do not serve).
public struct NoInstrumentation: ProxyInstrumentation {
    public init() {}
    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String) {}
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
    /// For callers that know no client (before a request, anonymous by definition).
    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double) {
        requestCompleted(policy: policy, status: status, seconds: seconds, client: ClientPrincipal.metricLabelAnonymous)
    }

    public func denied(code: ProxyError.Code) {
        denied(code: code, client: ClientPrincipal.metricLabelAnonymous)
    }
}
