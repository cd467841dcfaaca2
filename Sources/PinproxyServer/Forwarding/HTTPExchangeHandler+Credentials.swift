import Foundation
import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// The credential an exchange carries: fetched (or refused while the
/// upstream's 429 window for it is open), and a 429 that opens such a window.
extension HTTPExchangeHandler {
    /// The machine's `fetchToken`: the provider's answer (or the open 429
    /// window that stops the asking) goes back to the machine as an event.
    func fetchToken(_ credential: String, host: String, policy: HostPolicy?, holding upstream: UpstreamConnection,
                    context: ChannelHandlerContext) {
        guard let tokens = services.tokens.provider else {
            execute(machine.tokenFailed(.noSessions, for: upstream), context: context)
            return
        }
        let throttle = services.throttle
        // The common case answers here, on the loop: no window open for the
        // credential and its token at hand. A task and two thread hops (to
        // Swift's pool and back) cost more than the rest of such a request
        // (bench/ab --credential).
        if throttle.mayGoNow(credential: credential, host: host), let token = tokens.tokenNow(session: credential) {
            execute(machine.tokenArrived(token.reveal(), generation: TokenGeneration(rawValue: token.generation),
                                         for: upstream, now: .now()), context: context)
            return
        }
        context.eventLoop.makeFutureWithTask { () async throws -> TokenOutcome in
            // The upstream asked this credential to wait: it hears nothing until
            // then, or the request waits in the policy's throttle_queue (docs/contract.md §4).
            if let seconds = await throttle.admit(credential: credential, host: host, policy: policy) {
                return .throttled(seconds: seconds)
            }
            return .token(try await tokens.token(session: credential))
        }.assumeIsolated().whenComplete { result in
            switch result {
            case .success(.throttled(let seconds)):
                self.execute(self.machine.tokenFailed(.throttled(seconds: seconds), for: upstream), context: context)
            case .success(.token(let token)):
                self.execute(self.machine.tokenArrived(token.reveal(), generation: TokenGeneration(rawValue: token.generation),
                                                       for: upstream, now: .now()), context: context)
            case .failure(let error):
                // The error says why (accounts down, misconfigured, needs re-authorisation), never a secret.
                self.execute(self.machine.tokenFailed(.unavailable("\(error)"), for: upstream), context: context)
            }
        }
    }

    /// What asking for a token came to, short of an error.
    enum TokenOutcome {
        case token(BearerToken)
        case throttled(seconds: Int)
    }

    /// A 429 to a request that carried a credential opens that credential's
    /// window for the host, as long as its `Retry-After` says.
    func noteUpstreamThrottle(retryAfter: String?, credential: String, host: String) {
        services.throttle.record(credential: credential, host: host, retryAfter: retryAfter)
        services.logger.notice("upstream rate limited a credential; holding its requests back", metadata: [
            "host": "\(host)", "credential": "\(credential)", "retry_after": "\(retryAfter ?? "-")",
        ])
    }

    /// A routed request beyond its policy's `rate_limit` is refused here, before anything is dialled.
    func applyRateLimit(_ decision: inout RoutingDecision) {
        // The policy is read where the decision holds it: bound to a name, it
        // was retained once a request, from every loop (it is shared).
        guard case .success = decision.result, decision.policy?.rateLimit != nil,
              let seconds = services.rateLimiter.admit(policy: decision.policy!, client: decision.identity ?? Self.host(of: clientAddress))
        else { return }
        var refusal = ProxyError(.rateLimited, host: decision.host,
                                 detail: "the policy's rate_limit is spent; try again in \(seconds)s")
        refusal.retryAfterSeconds = seconds
        decision.result = .failure(refusal)
    }

    /// `127.0.0.1:5123` → `127.0.0.1`, `[::1]:5123` → `[::1]`: a client is its address, not its connection.
    static func host(of address: String) -> String {
        if address.hasPrefix("["), let end = address.firstIndex(of: "]") { return String(address[...end]) }
        guard let colon = address.lastIndex(of: ":") else { return address }
        return String(address[..<colon])
    }
}
