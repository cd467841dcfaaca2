import NIOCore
import PinproxyPolicy

/// Everything needed to reach one upstream: the name asked for, what to
/// dial, and under which policy. Made once per intercepted session (every
/// request of the session goes to its CONNECT's host) or per request on
/// the listener, and read by the pool, the connector and the exchange.
///
/// An immutable class: each request's route, the exchange's actions and
/// the pool's checkout hold the plan, and a struct's copy retained each of
/// its references (the host, the targets, the policy, the key's strings),
/// which every loop serving the policy shares, twice a request (issue 33,
/// bench/README.md's twenty-sixth pass). A variant is a new plan.
final class DialPlan: Sendable {
    /// The name the client asked for: SNI, hostname verification, pool key.
    let host: String
    let port: Int
    /// What to dial: the policy's `upstream` list, else `host:port`.
    let targets: [HostPort]
    let tls: Bool
    let policy: HostPolicy?
    let retries: Int
    let connectTimeout: TimeAmount
    let handshakeTimeout: TimeAmount
    /// False for probes: they update expiry and TLS info, not the traffic counters.
    let countsTraffic: Bool
    /// The request needs an HTTP/1.1 connection (a WebSocket upgrade): the
    /// dial offers only `http/1.1` in ALPN and an h2 connection is never leased.
    let requiresHTTP1: Bool
    /// The pool key for this plan, made with it (the host lowercased once).
    /// HTTP/1.1-only connections are pooled apart, so that a request that
    /// needs one never gets an h2 connection's stream.
    let poolKey: UpstreamPool.Key

    /// The plan for `host:port` under `policy` (or the defaults, for a host
    /// no policy covers): the policy's `upstream` list, else the host itself.
    init(host: String, port: Int, tls: Bool, policy: HostPolicy?, countsTraffic: Bool = true) {
        self.host = host
        self.port = port
        let upstream = policy?.spec.upstream ?? []
        self.targets = upstream.isEmpty ? [HostPort(host: host, port: port)] : upstream
        self.tls = tls
        self.policy = policy
        self.retries = policy?.spec.retries ?? HostPolicyDefaults.retries
        self.connectTimeout = TimeAmount(policy?.spec.connectTimeout ?? HostPolicyDefaults.connectTimeout)
        self.handshakeTimeout = TimeAmount(policy?.spec.handshakeTimeout ?? HostPolicyDefaults.handshakeTimeout)
        self.countsTraffic = countsTraffic
        self.requiresHTTP1 = false
        self.poolKey = UpstreamPool.Key(digest: policy?.digest ?? "-", host: host.lowercased(), port: port, tls: tls)
    }

    private init(_ plan: DialPlan, targets: [HostPort], requiresHTTP1: Bool) {
        host = plan.host
        port = plan.port
        self.targets = targets
        tls = plan.tls
        policy = plan.policy
        retries = plan.retries
        connectTimeout = plan.connectTimeout
        handshakeTimeout = plan.handshakeTimeout
        countsTraffic = plan.countsTraffic
        self.requiresHTTP1 = requiresHTTP1
        let key = plan.poolKey
        poolKey = UpstreamPool.Key(digest: key.digest, host: key.host, port: key.port, tls: key.tls, http1Only: requiresHTTP1)
    }

    /// The same plan for a request that needs an HTTP/1.1 connection.
    func requiringHTTP1() -> DialPlan {
        requiresHTTP1 ? self : DialPlan(self, targets: targets, requiresHTTP1: true)
    }

    /// The same plan with other targets to dial (the same name, key and policy).
    func dialling(_ targets: [HostPort]) -> DialPlan {
        DialPlan(self, targets: targets, requiresHTTP1: requiresHTTP1)
    }

    /// The ALPN offer that replaces the policy's for this dial, if any.
    var applicationProtocols: [String]? {
        requiresHTTP1 && (policy?.tlsContext.configuration.applicationProtocols.contains("h2") ?? false) ? ["http/1.1"] : nil
    }
}
