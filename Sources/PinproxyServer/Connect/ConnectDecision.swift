import PinproxyPolicy

/// What a CONNECT to `host:port` comes to, once the client's standing is
/// known: refused, tunnelled or intercepted. One decision for the listener's
/// CONNECT and for a transparent connection's `SNI:original-port`, so the two
/// can never disagree (docs/contract.md §3, transparent listener).
struct ConnectDecision {
    /// The policy that matched (for the access line even when refused).
    var policy: HostPolicy?
    /// The refusal, nil when admitted.
    var refusal: ProxyError?

    /// Admitted and the policy intercepts; admitted otherwise means a tunnel.
    var intercept: Bool { refusal == nil && policy?.spec.action == .intercept }

    init(host: String, port: Int, client: ClientStanding, snapshot: PolicySnapshot) {
        policy = snapshot.policy(forHost: host)
        do {
            // The credential before the host (docs/contract.md §15): a 407 whatever the host.
            try client.authenticated(host: host, config: snapshot.config)
            try RequestRouter.checkAllowed(host: host, port: port, kind: .connect, policy: policy, snapshot: snapshot)
            // Refused here, a client never reaches the upstream, a tunnel or the session's token.
            try client.admit(host: host, policy: policy, config: snapshot.config)
        } catch let error as ProxyError {
            refusal = error
        } catch {
            refusal = ProxyError(.badRequest, host: host, detail: "\(error)")
        }
    }
}
