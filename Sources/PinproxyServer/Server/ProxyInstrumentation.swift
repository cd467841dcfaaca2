import Foundation
import PinproxyMetrics
import PinproxyPolicy

/// What the proxy reports as it works; metrics implement it (docs/contract.md §6). The
/// request path calls these without knowing metric names or label rules.
/// Hosts are given as the policy that matched (nil: none), so a metric label
/// can only ever be a policy's pattern or `_none`, never a client's name.
public protocol ProxyInstrumentation: Sendable {
    func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double)
    func denied(code: ProxyError.Code)
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
}

extension ProxyInstrumentation {
    public func responseCut(policy: HostPolicy?, reason: ResponseCutReason) {}
}

/// Reports nothing (tests, and commands that do not serve).
public struct NoInstrumentation: ProxyInstrumentation {
    public init() {}
    public func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double) {}
    public func denied(code: ProxyError.Code) {}
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
