import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// How an exchange is changed in place and how it ends: each ending (a
/// refusal, an abort, a finish) happens here and only here.
extension ExchangeStateMachine {
    /// Where the current exchange's request parts go.
    enum PartSink {
        case sending(Upstream)
        case holding
        case none
    }

    /// Runs `body` on the current exchange, which stays in its state.
    mutating func modify(_ body: (Exchange, PartSink) -> Action) -> Action {
        switch state {
        case .acquiring(let exchange, _), .authorizing(let exchange, _, _):
            return body(exchange, .holding)
        case .forwarding(let exchange, _, let upstream):
            return body(exchange, .sending(upstream))
        case .discardingRefusal(let exchange, _, _), .responded(let exchange), .refused(let exchange), .switching(let exchange, _):
            return body(exchange, .none)
        case .idle, .authenticating, .closed, .handedOver, .spliced:
            return .none
        case .modifying:
            preconditionFailure("modify while modifying")
        }
    }

    /// Takes the current exchange (and the upstream it holds) out of the
    /// state, leaving `.modifying`; nil when there is none.
    mutating func takeExchange() -> (Exchange, Upstream?)? {
        let taken: (Exchange, Upstream?)?
        switch state {
        case .acquiring(let exchange, _): taken = (exchange, nil)
        case .authorizing(let exchange, _, let upstream), .forwarding(let exchange, _, let upstream),
             .discardingRefusal(let exchange, _, let upstream), .switching(let exchange, let upstream): taken = (exchange, upstream)
        case .responded(let exchange), .refused(let exchange): taken = (exchange, nil)
        case .idle, .authenticating, .closed, .handedOver, .spliced: return nil
        case .modifying: preconditionFailure("take while modifying")
        }
        state = .modifying
        return taken
    }

    /// Sends the refusal; the exchange ends now unless the request body is
    /// still arriving on a connection that stays open.
    mutating func refuse(_ exchange: Exchange, _ refusal: ProxyError, release upstream: Upstream?, reusable: Bool = false) -> Action {
        exchange.responseDeadline = nil
        exchange.error = refusal
        exchange.status = Int(refusal.status.code)
        if exchange.host.isEmpty, let host = refusal.host { exchange.host = host }
        if exchange.responseStarted {
            exchange.closeAfter = true
            state = .closed
            return .abort(release: upstream, finished: exchange)
        }
        exchange.response = .refused
        if refusal.code == .badRequest { exchange.closeAfter = true }
        // An unread request body on a refused request: close rather than read it all.
        if !exchange.requestEnded, case .length(let length)? = exchange.framing, length > Self.drainLimit {
            exchange.closeAfter = true
        }
        if exchange.closeAfter {
            state = .closed
            return .refuse(refusal, release: upstream, reusable: reusable, close: true, finished: exchange, next: .nothing)
        }
        if exchange.requestEnded {
            state = .idle
            return .refuse(refusal, release: upstream, reusable: reusable, close: false, finished: exchange, next: afterExchange())
        }
        state = .refused(exchange)
        return .refuse(refusal, release: upstream, reusable: reusable, close: false, finished: nil, next: .nothing)
    }

    /// The response was under way when something failed: the app's
    /// connection is cut so the response cannot look complete.
    mutating func abort(_ exchange: Exchange, failure: ExchangeFailure, release upstream: Upstream?) -> Action {
        exchange.failure = failure
        exchange.closeAfter = true
        exchange.responseDeadline = nil
        exchange.bodyDeadline = nil
        state = .closed
        return .abort(release: upstream, finished: exchange)
    }

    /// Both directions are complete: log it, then the next request (or close).
    mutating func finish(_ exchange: Exchange) -> Action {
        if exchange.closeAfter {
            state = .closed
            return .finish(exchange, next: .nothing)  // the response's last write closes
        }
        state = .idle
        return .finish(exchange, next: afterExchange())
    }

    /// What follows an exchange that leaves the connection open.
    func afterExchange() -> Next {
        shuttingDown ? .close : .takeNext
    }

    /// Marks the state closed after an `afterExchange` that said `.close`.
    mutating func closing() {
        state = .closed
    }

    /// The upstream connection the current exchange holds, if any.
    var heldUpstream: Upstream? {
        switch state {
        case .authorizing(_, _, let upstream), .forwarding(_, _, let upstream), .discardingRefusal(_, _, let upstream),
             .switching(_, let upstream): return upstream
        default: return nil
        }
    }
}
