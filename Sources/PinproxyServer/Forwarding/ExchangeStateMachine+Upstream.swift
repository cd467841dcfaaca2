import Foundation
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// The upstream's side of an exchange: the connection, the token, the
/// response, the connection's loss, and the deadlines.
extension ExchangeStateMachine {
    /// What happens to the app's `Authorization` and the bearer token, decided
    /// by `TokenAttachment` from the policy and the connection's pin verdict.
    enum Authorization: Equatable {
        /// The policy attaches no token: the head goes up as routed.
        case untouched
        /// No token (the pins do not permit it, TRACE, or no credential for
        /// this client); the app's own `header` goes too when `replace_client_auth` says so.
        case withheld(removeClientAuthorization: Bool, header: String = "Authorization")
        /// Fetch the credential's token, put it into `header` as `format` says, in place of the app's.
        case attach(session: String, header: String = "Authorization", format: String = "Bearer {token}")
        /// `by_client` with `require: true`, and no credential for this client: 403 `client_denied`.
        case denied(detail: String)
    }

    /// The pool or a dial gave a connection for the exchange being acquired.
    mutating func upstreamAcquired(_ upstream: Upstream, reused: Bool, pin: String?, address: String,
                                   authorization: Authorization, now: NIODeadline) -> Action {
        guard case .acquiring(let exchange, let route) = state else {
            return .giveBack(upstream)  // the app left, or the exchange was refused meanwhile
        }
        state = .modifying
        exchange.reused = reused
        exchange.pin = pin
        exchange.upstreamAddress = address
        switch authorization {
        case .untouched:
            break
        case .withheld(let remove, let header):
            if remove { route.upstreamHead.remove(name: header) }
        case .attach(let session, let header, let format):
            // Never a mix of the app's credentials and pinproxy's.
            route.upstreamHead.remove(name: header)
            exchange.token = .fetching(TokenPlacement(credential: session, header: header, format: format))
            state = .authorizing(exchange, route, upstream)
            return .fetchToken(credential: session, host: exchange.host, policy: exchange.policy, holding: upstream)
        case .denied(let detail):
            // Nothing was written on the connection: it goes back to the pool as it is.
            return refuse(exchange, ProxyError(.clientDenied, host: exchange.host, detail: detail), release: upstream, reusable: true)
        }
        return send(exchange, route, on: upstream, now: now)
    }

    mutating func upstreamFailed(_ error: any Error) -> Action {
        guard case .acquiring(let exchange, _) = state else { return .none }
        state = .modifying
        let refusal = UpstreamConnector.refusal(for: error, host: exchange.host)
        // The access line names the verdict of a refused pin check too.
        exchange.pin = PinVerdict(refusedWith: refusal.code)?.metricLabel
        return refuse(exchange, refusal, release: nil)
    }

    /// Head and pending parts go up together: the head always first.
    mutating func send(_ exchange: Exchange, _ route: Route, on upstream: Upstream, now: NIODeadline) -> Action {
        let pending = exchange.pending
        exchange.pending = PendingParts()
        if exchange.requestEnded { exchange.responseDeadline = now + exchange.responseTimeout }
        let readClient = !exchange.requestEnded
        state = .forwarding(exchange, route, upstream)
        return .sendRequest(route, pending: pending, to: upstream, flush: !inReadBurst, readClient: readClient)
    }

    // MARK: The response

    /// The upstream's head. One read as bytes goes on to the app as its
    /// bytes, edited (`ClientResponseHead.forwarded`), and an HTTP/2 block as
    /// its block (`ClientResponseHead.block`); only a `101` and an
    /// informational answer are made whole here.
    mutating func responseHead(_ head: UpstreamResponseHead, now: NIODeadline) -> Action {
        if case .authorizing = state { return unaskedAnswer() }
        guard case .forwarding(let exchange, let route, let upstream) = state else { return .none }
        state = .modifying
        let code = head.statusCode
        if code == 101 {
            return switchingProtocols(head.head, exchange, route, upstream)
        }
        if code < 100 {
            // NIO's decoder reads a status line's three digits as a number, so
            // `099` arrives as 99: no status an HTTP/1.1 client parses. Refused,
            // and its connection, which said something odd, is not reused.
            exchange.upstreamReusable = false
            return refuse(exchange, ProxyError(.connectFailed, host: exchange.host,
                                               detail: "upstream \(exchange.host) answered with status \(code), below 100"),
                          release: upstream)
        }
        if code < 200 {
            state = .forwarding(exchange, route, upstream)
            return .writeInformational(MessageRules.clientHead(from: head.head, closing: false))
        }
        if !head.isKeepAlive { exchange.upstreamReusable = false }
        if code == 401, let action = replayWithFreshToken(exchange, route, upstream) {
            return action
        }
        exchange.status = code
        exchange.response = .streaming(bodyless: code == 204 || code == 304 || exchange.method == .HEAD)
        exchange.responseDeadline = now + exchange.responseTimeout  // now between body reads
        let clientHead: ClientResponseHead
        switch head {
        case .bytes(let bytes): clientHead = .forwarded(bytes, closing: exchange.closeAfter)
        case .block(let block): clientHead = .block(block, closing: exchange.closeAfter)
        }
        state = .forwarding(exchange, route, upstream)
        if code == 429, let credential = exchange.token.attachedCredential {
            return .writeResponseHead(clientHead, throttles: (credential, exchange.host, head.first("retry-after")))
        }
        return .writeResponseHead(clientHead)
    }

    mutating func responseBody(_ body: ByteBuffer, now: NIODeadline) -> Action {
        switch state {
        case .authorizing:
            return unaskedAnswer()
        case .forwarding(let exchange, _, _) where exchange.response == .streaming(bodyless: true):
            // The app's encoder frames a 204, a 304 or a HEAD answer as bodiless,
            // so these bytes would reach the app raw and be read as the answer to
            // its next request. Dropped; the response ends here, and the
            // connection (or HTTP/2 stream) that sent them is not used again.
            guard body.readableBytes > 0 else { return .none }
            exchange.response = .droppedBody
            exchange.upstreamReusable = false
            return responseEnd(nil)
        case .forwarding(let exchange, _, _):
            // The exchange is a class: nothing in the state changes.
            exchange.bytesDown += body.readableBytes
            exchange.responseDeadline = now + exchange.responseTimeout
            return .writeResponseBody(body)
        default:
            return .none  // a swallowed 401's body
        }
    }

    mutating func responseEnd(_ trailers: HTTPHeaders?) -> Action {
        switch state {
        case .authorizing:
            return unaskedAnswer()
        case .switching(let exchange, let upstream):
            state = .spliced(exchange, upstream)
            return .splice(upstream, finished: exchange)
        case .discardingRefusal(let exchange, let route, let upstream):
            state = .modifying
            exchange.token = .none  // `pending` holds the replay since the 401
            let reusable = exchange.upstreamReusable
            exchange.upstreamReusable = true
            state = .acquiring(exchange, route)
            return .releaseAndAcquire(upstream, reusable: reusable, route: route)
        case .forwarding(let exchange, _, let upstream):
            state = .modifying
            exchange.responseDeadline = nil
            // An upstream that answered before the request was all sent (413, 401…):
            // that connection's framing is now unknowable, so it is not reused.
            let reusable = exchange.upstreamReusable && exchange.requestEnded
            let close = exchange.closeAfter
            guard exchange.requestEnded else {
                state = .responded(exchange)
                return .endResponse(trailers, release: upstream, reusable: reusable, closeClient: close, finished: nil, next: .nothing)
            }
            let next: Next
            if close {
                state = .closed
                next = .nothing
            } else {
                state = .idle
                next = afterExchange()
            }
            return .endResponse(trailers, release: upstream, reusable: reusable, closeClient: close, finished: exchange, next: next)
        default:
            return .none
        }
    }

    /// The held connection answered before the request was written (the token
    /// is still being fetched): its framing cannot be trusted, so it is
    /// dropped, and the request, of which nothing was sent, takes another.
    private mutating func unaskedAnswer() -> Action {
        upstreamClosed(nil)
    }

    /// The upstream connection failed or closed while the exchange held it.
    mutating func upstreamClosed(_ error: (any Error)?) -> Action {
        switch state {
        case .authorizing(let exchange, let route, let upstream):
            // Lost while the token was fetched: nothing was written, so another
            // connection may carry the request, whatever its method (once).
            state = .modifying
            guard !exchange.retried else {
                return refuse(exchange, lostBeforeAnswer(exchange, error), release: upstream)
            }
            exchange.retried = true
            exchange.token = .none
            state = .acquiring(exchange, route)
            return .releaseAndAcquire(upstream, reusable: false, route: route)
        case .switching(let exchange, let upstream):
            state = .modifying
            return abort(exchange, failure: .upstreamClosed, release: upstream)
        case .forwarding(let exchange, let route, let upstream), .discardingRefusal(let exchange, let route, let upstream):
            state = .modifying
            exchange.responseDeadline = nil
            if exchange.responseStarted {
                return abort(exchange, failure: .upstreamClosed, release: upstream)
            }
            if exchange.retryableAfterLoss(error) {
                // A pooled connection the server had already closed: once more, on a fresh one.
                exchange.retried = true
                exchange.pending = .ended(after: [])
                state = .acquiring(exchange, route)
                return .releaseAndAcquire(upstream, reusable: false, route: route)
            }
            return refuse(exchange, lostBeforeAnswer(exchange, error), release: upstream)
        default:
            return .none
        }
    }

    private func lostBeforeAnswer(_ exchange: Exchange, _ error: (any Error)?) -> ProxyError {
        if let tls = error as? TLSError, case .tlsHandshake = tls {
            // The upstream ended its TLS before answering (a TLS 1.3 server that
            // wanted a client certificate): a TLS failure, named as one.
            return ProxyError.tls(tls, host: exchange.host)
        }
        let detail = error.map { "upstream \(exchange.host) failed before responding: \(UpstreamConnector.describe($0))" }
            ?? "upstream \(exchange.host) closed the connection before responding"
        return ProxyError(.connectFailed, host: exchange.host, detail: detail)
    }

    // MARK: Deadlines

    /// Checked by the event loop's sweeper. Only the other side's silence
    /// counts: while pinproxy itself withholds reads (backpressure), a
    /// deadline moves on.
    mutating func deadlinesPassed(now: NIODeadline, clientWritable: Bool, upstreamWritable: Bool) -> Action {
        let idleTimeout = self.idleTimeout
        switch state {
        case .acquiring(let exchange, _), .authorizing(let exchange, _, _):
            if let deadline = exchange.bodyDeadline, deadline <= now {
                return modify { exchange, _ in exchange.bodyDeadline = now + idleTimeout; return .none }  // not reading yet
            }
            return .none
        case .forwarding(let exchange, _, _), .responded(let exchange), .refused(let exchange):
            if let deadline = exchange.bodyDeadline, deadline <= now {
                if case .forwarding = state, !upstreamWritable {
                    return modify { exchange, _ in exchange.bodyDeadline = now + idleTimeout; return .none }
                }
                return requestBodyStalled()
            }
            if let deadline = exchange.responseDeadline, deadline <= now {
                return upstreamStalled(now: now, clientWritable: clientWritable)
            }
            return .none
        case .idle, .authenticating, .discardingRefusal, .closed, .handedOver, .switching, .spliced:
            return .none  // a splice's silence is `SplicePipeline`'s idle timer's
        case .modifying:
            preconditionFailure("deadlines while modifying")
        }
    }

    /// No byte of the request body for `idle_timeout` while pinproxy was
    /// reading: cut (408), the upstream connection discarded, its slot freed,
    /// so a silent app cannot hold a host's slots.
    private mutating func requestBodyStalled() -> Action {
        guard case .some((let exchange, let upstream)) = takeExchange() else { return .none }
        exchange.bodyDeadline = nil
        exchange.closeAfter = true
        return refuse(exchange, ProxyError(.badRequest, host: exchange.host.isEmpty ? nil : exchange.host,
                                           detail: "the request body made no progress for \(idleTimeout.nanoseconds / 1_000_000_000) s (limits.idle_timeout)",
                                           status: .requestTimeout), release: upstream)
    }

    /// `response_timeout` ran out: for the head (504), or between two reads
    /// of the body (the app's connection is cut).
    private mutating func upstreamStalled(now: NIODeadline, clientWritable: Bool) -> Action {
        guard case .forwarding(let exchange, let route, let upstream) = state else {
            return modify { exchange, _ in exchange.responseDeadline = nil; return .none }
        }
        state = .modifying
        let seconds = exchange.responseTimeout.nanoseconds / 1_000_000_000
        if exchange.responseStarted {
            guard clientWritable else {
                exchange.responseDeadline = now + exchange.responseTimeout  // withheld for a slow app
                state = .forwarding(exchange, route, upstream)
                return .none
            }
            return abort(exchange, failure: .upstreamTimeout, release: upstream)
        }
        return refuse(exchange, ProxyError(.upstreamTimeout, host: exchange.host,
                                           detail: "no response from \(exchange.host) within \(seconds) s (response_timeout)"), release: upstream)
    }
}
