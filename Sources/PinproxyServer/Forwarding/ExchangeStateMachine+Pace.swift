import NIOCore
import NIOHTTP1

/// Reading and writing pace: backpressure is one idea, done once. Reads from
/// the app wait while the upstream cannot take more, reads from the upstream
/// while the app cannot, and writes are flushed at the end of a read burst.
extension ExchangeStateMachine {
    /// The app's read burst is over: flush what went upstream, ask for more.
    mutating func clientReadComplete(upstreamWritable: Bool) -> Action {
        inReadBurst = false
        switch state {
        case .idle:
            return .readClient  // a head may span several reads
        case .forwarding(let exchange, _, let upstream):
            return .flushUpstream(upstream, readClient: !exchange.requestEnded && upstreamWritable)
        case .responded(let exchange), .refused(let exchange):
            return exchange.requestEnded ? .none : .readClient
        case .acquiring, .authorizing, .discardingRefusal, .closed, .handedOver, .switching, .spliced:
            return .none  // no more body until the head has gone up
        case .authenticating:
            return .none  // nothing more is read until the credential is checked
        case .modifying:
            preconditionFailure("read complete while modifying")
        }
    }

    func clientWritabilityChanged(writable: Bool) -> Action {
        if writable, case .forwarding(let exchange, _, let upstream) = state, exchange.responseStarted {
            return .readUpstream(upstream)
        }
        return .none
    }

    func upstreamReadComplete(clientWritable: Bool) -> Action {
        switch state {
        case .forwarding(_, _, let upstream), .discardingRefusal(_, _, let upstream):
            return .flushClient(readUpstream: clientWritable ? upstream : nil)
        default:
            return .none
        }
    }

    func upstreamWritabilityChanged(writable: Bool) -> Action {
        if writable, case .forwarding(let exchange, _, _) = state, !exchange.requestEnded {
            return .readClient
        }
        return .none
    }
}
