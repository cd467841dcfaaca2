import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// The bearer token of an exchange (docs/contract.md §4, §10): whether one
/// goes up, its arrival or failure while the connection is held, and the
/// one replay with a fresh token after the upstream refuses it with 401.
extension ExchangeStateMachine {
    /// What `TokenAttachment` decides for the exchange an upstream is being
    /// acquired for, under its route's plan, given that connection's pin
    /// verdict (nil: none is). Nil when nothing is being acquired.
    ///
    /// `mutating` though it changes nothing: the exchange handler calls it
    /// on its machine in place, where a non-mutating call first copied the
    /// whole machine (about eight retains and releases a request, issue 33).
    mutating func tokenDecision(verdict: () -> PinVerdict?, connectIdentity: String?) -> TokenAttachment.Decision? {
        guard case .acquiring(let exchange, let route) = state else { return nil }
        return TokenAttachment.decide(policy: route.plan.policy, verdict: verdict, method: exchange.method, tls: route.plan.tls,
                                      identity: exchange.identity ?? connectIdentity)
    }

    /// The plan of the upstream being acquired (nil when none is), for a
    /// warning about the token.
    var acquiringPlan: DialPlan? {
        guard case .acquiring(_, let route) = state else { return nil }
        return route.plan
    }

    /// The credential's token arrived for the connection held meanwhile.
    mutating func tokenArrived(_ token: String, generation: TokenGeneration, for upstream: Upstream, now: NIODeadline) -> Action {
        guard case .authorizing(let exchange, let route, let held) = state, held === upstream,
              case .fetching(let placement) = exchange.token else { return .none }
        state = .modifying
        route.upstreamHead.replaceOrAdd(name: placement.header, value: placement.value(for: token))
        exchange.token = .attached(placement, generation)
        return send(exchange, route, on: upstream, now: now)
    }

    /// No token goes up: none could be had, or the upstream's 429 window for
    /// this credential is still open. Nothing was written on the held
    /// connection: it goes back to the pool as it is.
    mutating func tokenFailed(_ failure: TokenFailure, for upstream: Upstream) -> Action {
        guard case .authorizing(let exchange, _, let held) = state, held === upstream,
              case .fetching(let placement) = exchange.token else { return .none }
        state = .modifying
        let credential = placement.credential
        let refusal: ProxyError
        switch failure {
        case .noSessions:
            refusal = ProxyError(.tokenUnavailable, host: exchange.host, detail: "no token sessions are configured for \(credential)")
        case .unavailable(let reason):
            refusal = ProxyError(.tokenUnavailable, host: exchange.host, detail: "no token for session \(credential): \(reason)")
        case .throttled(let seconds):
            var throttled = ProxyError(.upstreamThrottled, host: exchange.host,
                                       detail: "the upstream answered 429 to credential \(credential); held back for \(seconds)s more")
            throttled.retryAfterSeconds = seconds
            refusal = throttled
        }
        return refuse(exchange, refusal, release: upstream, reusable: true)
    }

    /// A 401 to a request that carried a token, whose body was kept and has
    /// all been sent: that generation goes, this 401 is swallowed, and the
    /// request is sent once more with a fresh token (once). Nil: the 401
    /// goes to the app. Called from `responseHead` with the state set aside.
    mutating func replayWithFreshToken(_ exchange: Exchange, _ route: Route, _ upstream: Upstream) -> Action? {
        guard case .attached(let placement, let generation) = exchange.token, exchange.requestEnded,
              case .keeping(let body, _) = exchange.replay else { return nil }
        exchange.replay = .used
        exchange.pending = .ended(after: body)
        exchange.responseDeadline = nil
        state = .discardingRefusal(exchange, route, upstream)
        return .invalidateToken(credential: placement.credential, generation: generation)
    }
}
