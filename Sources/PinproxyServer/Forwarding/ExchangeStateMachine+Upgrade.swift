import NIOCore
import NIOHTTP1

/// An upstream's `101 Switching Protocols` (docs/contract.md §10 and §11).
/// Only a WebSocket upgrade that the policy allowed, whose request was
/// complete and which nothing followed, becomes a splice; every other `101`
/// ends that upstream connection with 502 `connect_failed`, because what
/// the upstream sends next is no HTTP pinproxy can frame. The splice's end,
/// or its failure to be set up, ends the exchange here too.
extension ExchangeStateMachine {
    /// Called from `responseHead` with the state set aside (`.modifying`).
    mutating func switchingProtocols(_ head: HTTPResponseHead, _ exchange: Exchange, _ route: Route, _ upstream: Upstream) -> Action {
        let host = exchange.host
        let detail: String
        if !route.webSocket {
            detail = "upstream \(host) answered 101 Switching Protocols to a request that asked for no upgrade"
        } else if !exchange.requestEnded {
            // The rest of the body would reach a peer that speaks another protocol.
            detail = "upstream \(host) switched protocols before the upgrade request's body was complete"
        } else if hasQueuedParts {
            // The app did not wait for the answer (RFC 6455 §4.1): what it sent
            // was read as HTTP, and cannot be handed to the splice as it came.
            detail = "the app sent more after its WebSocket upgrade request, before the answer"
        } else if !head.headers["upgrade"].contains(where: { $0.lowercased().contains("websocket") }) {
            detail = "upstream \(host) answered 101 with Upgrade \"\(head.headers["upgrade"].first ?? "")\" to a WebSocket upgrade"
        } else {
            exchange.response = .switched
            exchange.status = 101
            exchange.responseDeadline = nil
            exchange.bodyDeadline = nil
            exchange.upstreamReusable = false
            state = .switching(exchange, upstream)
            return .writeResponseHead(.head(MessageRules.switchingHead(from: head)))
        }
        // An upgrade request closes the app's connection after its answer anyway
        // (routing said so: the decoder reads nothing after it).
        return refuse(exchange, ProxyError(.connectFailed, host: host, detail: detail), release: upstream)
    }

    /// The splice ended (either side closed, or it was idle): the exchange's
    /// line, status 101, with the bytes relayed each way.
    mutating func spliceEnded(bytesUp: Int, bytesDown: Int) -> Action {
        guard case .spliced(let exchange, _) = state else { return .none }
        state = .closed
        exchange.bytesUp += bytesUp
        exchange.bytesDown += bytesDown
        return .finish(exchange, next: .nothing)
    }

    /// The `101`'s end went to the app but the two connections could not be
    /// spliced: the upstream is discarded, the line says why, the app's
    /// connection closes.
    mutating func spliceFailed(_ reason: SpliceFailure) -> Action {
        guard case .spliced(let exchange, let upstream) = state else { return .none }
        state = .closed
        exchange.failure = .spliceNotSetUp(reason)
        return .abandonSplice(release: upstream, finished: exchange)
    }
}
