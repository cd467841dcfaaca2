import Foundation

/// What the proxy reports as it works; metrics implement it (DESIGN §6). The
/// request path calls these without knowing metric names or label rules.
/// `host` is always a policy pattern or `_none`, never a client-supplied name.
public protocol ProxyInstrumentation: Sendable {
    func requestCompleted(host: String, status: Int, seconds: Double)
    func denied(code: String)
    func upstreamHandshake(host: String, result: String, seconds: Double)
    func upstreamTLS(host: String, version: String, cipher: String, leafNotAfter: Date?)
    func pinValidation(host: String, result: String)
    func clientConnections(delta: Int)
    func upstreamConnections(host: String, delta: Int)
    func bytes(host: String, up: Int, down: Int)
    func mintedCertificate()
}

/// Reports nothing (tests, and commands that do not serve).
public struct NoInstrumentation: ProxyInstrumentation {
    public init() {}
    public func requestCompleted(host: String, status: Int, seconds: Double) {}
    public func denied(code: String) {}
    public func upstreamHandshake(host: String, result: String, seconds: Double) {}
    public func upstreamTLS(host: String, version: String, cipher: String, leafNotAfter: Date?) {}
    public func pinValidation(host: String, result: String) {}
    public func clientConnections(delta: Int) {}
    public func upstreamConnections(host: String, delta: Int) {}
    public func bytes(host: String, up: Int, down: Int) {}
    public func mintedCertificate() {}
}
