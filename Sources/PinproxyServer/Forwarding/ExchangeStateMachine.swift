import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// The request path of one client connection as a value: events go in (a
/// request part, the end of a credential check, an upstream connection, a
/// token or why there is none, a response part, a deadline, the end of a
/// splice), one `Action` comes out, and `HTTPExchangeHandler` carries it
/// out. The machine holds all of the exchange's state; the handler holds
/// channels. No I/O and no clock here: time comes in with the events, so the
/// machine is tested with tables of events and the actions expected.
///
/// One exchange at a time; parts of pipelined requests wait in `queued`.
/// Releasing an upstream, refusing and ending an exchange each happen in
/// one place (`refuse`, `abort`, `finish`). Generic over the upstream
/// connection so that tests can drive it with stand-ins.
struct ExchangeStateMachine<Upstream: AnyObject> {
    enum State {
        /// Between requests.
        case idle
        /// A head waits while the app's proxy credential is checked off the
        /// event loop (PBKDF2): no read is asked for, and what arrives anyway
        /// waits in the queue, behind the head, until `routed`.
        case authenticating(AppRequestHead)
        // The states that dial, send or send again carry the route; the
        // exchange's own request and response sub-states (`RequestSide`,
        // `ResponseSide`) say how far each direction got.

        /// Routed; waiting for an upstream connection (pool, dial, TLS, pins).
        case acquiring(Exchange, Route)
        /// An upstream connection is held while the bearer token is fetched.
        case authorizing(Exchange, Route, Upstream)
        /// The head went up; the request body and the response stream.
        case forwarding(Exchange, Route, Upstream)
        /// The upstream refused the token: its 401 is swallowed, then the
        /// request is sent again with a fresh one.
        case discardingRefusal(Exchange, Route, Upstream)
        /// The response is complete; the rest of the request body is dropped.
        case responded(Exchange)
        /// A refusal was sent on a connection that stays open; the rest of
        /// the request body is dropped.
        case refused(Exchange)
        /// The upstream answered `101` to a WebSocket upgrade and its head went
        /// to the app; the end of that message comes next, then the splice.
        case switching(Exchange, Upstream)
        /// After a WebSocket `101` the connection is a byte splice with that
        /// upstream (docs/contract.md §11): no HTTP follows. The exchange
        /// waits for the splice's end (`spliceEnded`), or for the reason it
        /// could not be set up (`spliceFailed`), to be logged.
        case spliced(Exchange, Upstream)
        /// A CONNECT took the connection over: its parts belong to the
        /// `ConnectHandler` after this one.
        case handedOver
        /// The connection is closing or closed.
        case closed
        /// Only while a transition that takes the exchange out of its state runs:
        /// an event arriving then is a bug, and says so.
        case modifying
    }

    /// What to do once an exchange has ended.
    enum Next: Equatable {
        /// Take the next (queued) request.
        case takeNext
        /// Close the connection now (shutdown, or nothing else will close it).
        case close
        /// Nothing: a write already in flight closes the connection.
        case nothing
    }

    enum Action {
        case none
        /// Route this head (policy lookup), then call `routed`.
        case route(AppRequestHead)
        /// Hand this part to the next handler (a CONNECT's).
        case passOn(AppRequestPart)
        /// Acquire an upstream for the route's plan. The route, a class, rather
        /// than a copy of its plan: a copy retained each of the plan's
        /// references, shared by every request of the policy on every loop.
        case acquireUpstream(Route)
        /// Fetch the credential's token (unless its 429 window for `host` is
        /// open: then the request waits in the policy's `throttle_queue`, or
        /// is refused), then call `tokenArrived` or `tokenFailed`.
        case fetchToken(credential: String, host: String, policy: HostPolicy?, holding: Upstream)
        /// Write the head and every pending part (flushing unless a read burst
        /// is under way: its end flushes), read the response, and read more
        /// of the request unless it has ended.
        /// The head is the route's `upstreamHead`, read where the route holds it.
        case sendRequest(Route, pending: PendingParts, to: Upstream, flush: Bool, readClient: Bool)
        case forwardBody(ByteBuffer, to: Upstream)
        case forwardEnd(HTTPHeaders?, to: Upstream)
        case writeInformational(HTTPResponseHead)
        /// Write the response head; a 429 to a request that carried a
        /// credential opens that credential's window for the host, as long
        /// as its `Retry-After` says (`throttles`).
        case writeResponseHead(ClientResponseHead, throttles: (credential: String, host: String, retryAfter: String?)? = nil)
        case writeResponseBody(ByteBuffer)
        /// The response ends: give the upstream back, end the app's response
        /// (closing after it when `closeClient`), and log `finished` when the
        /// exchange is over (else read the rest of the request).
        case endResponse(HTTPHeaders?, release: Upstream, reusable: Bool, closeClient: Bool, finished: Exchange?, next: Next)
        /// The token was refused: invalidate its generation (the 401 is
        /// swallowed; the request goes again with a fresh token once it ends).
        case invalidateToken(credential: String, generation: TokenGeneration)
        /// Give the upstream back and acquire another for the same request.
        case releaseAndAcquire(Upstream?, reusable: Bool, route: Route)
        /// Send the refusal (status, `X-Pinproxy-Error`, JSON body), giving
        /// back the upstream held (reusable only if nothing was written on it).
        case refuse(ProxyError, release: Upstream?, reusable: Bool, close: Bool, finished: Exchange?, next: Next)
        /// The response was already under way: cut the app's connection.
        case abort(release: Upstream?, finished: Exchange)
        /// The WebSocket `101` is complete: end the app's response, take the
        /// HTTP layers out of both connections and splice them byte for byte.
        /// The upstream never goes back to the pool; `spliceEnded` or
        /// `spliceFailed` follows.
        case splice(Upstream, finished: Exchange)
        /// The splice could not be set up: discard the upstream, log
        /// `finished` (its `failure` says why), close the app's connection.
        case abandonSplice(release: Upstream, finished: Exchange)
        /// The exchange is over with nothing left to write.
        case finish(Exchange, next: Next)
        /// The app went away: give the upstream back (not reusable) and log.
        case clientGone(release: Upstream?, finished: Exchange?)
        case giveBack(Upstream)
        case flushUpstream(Upstream, readClient: Bool)
        case flushClient(readUpstream: Upstream?)
        case readClient
        case readUpstream(Upstream)
        case closeClient
    }

    /// Set only by the machine itself (its extensions live in other files).
    var state: State = .idle
    /// Parts of pipelined requests that arrived while an exchange was in progress.
    /// Made at the first such part: most connections never pipeline, and an
    /// HTTP/2 stream (a machine per request) never does, so an empty buffer
    /// made up front was an allocation per stream (issue 33).
    private var queued: CircularBuffer<AppRequestPart>?
    var shuttingDown = false
    /// The identity of the request routed last: a refusal before the next
    /// one is routed (a malformed head) is counted under it.
    private(set) var lastRoutedIdentity: String?
    /// Inside a burst of reads from the app: writes upstream wait for the
    /// burst's end, so a request read at once leaves in one write.
    var inReadBurst = false
    /// CONNECT is taken on the listener, refused inside an intercepted session.
    let acceptsConnect: Bool
    /// `limits.idle_timeout`: how long a request body may make no progress.
    let idleTimeout: TimeAmount
    /// Request bodies up to this size are kept for a replay after a 401.
    static var replayLimit: Int { 64 * 1024 }
    /// A refused request whose unread body is larger than this closes the
    /// connection rather than reading it all.
    static var drainLimit: UInt64 { 64 * 1024 }

    /// Whether request parts arrived after the current one ended (pipelined).
    var hasQueuedParts: Bool { !(queued?.isEmpty ?? true) }

    init(idleTimeout: TimeAmount, acceptsConnect: Bool) {
        self.idleTimeout = idleTimeout
        self.acceptsConnect = acceptsConnect
    }

    // MARK: The app's side

    mutating func received(_ part: AppRequestPart, now: NIODeadline) -> Action {
        inReadBurst = true
        switch state {
        case .idle:
            guard case .head(let head) = part else { return .none }  // the tail of a refused request
            if head.method == .CONNECT && acceptsConnect {
                state = .handedOver
                return .passOn(part)
            }
            return .route(head)
        case .handedOver:
            return .passOn(part)
        case .authenticating:
            queue(part)  // after the head's routing, in the order it came
            return .none
        case .closed, .spliced:
            return .none
        case .acquiring(let exchange, _), .authorizing(let exchange, _, _), .forwarding(let exchange, _, _),
             .discardingRefusal(let exchange, _, _), .responded(let exchange), .refused(let exchange), .switching(let exchange, _):
            if exchange.requestEnded {
                queue(part)  // the next pipelined request waits its turn
                return .none
            }
            switch part {
            case .head:
                // The decoder ends a request before the next head; should the two
                // ever disagree, the connection is refused, not the process.
                return refuseAndClose(ProxyError(.badRequest, host: nil, detail: "a request head arrived inside a request"))
            case .body(let body):
                return requestBody(body, of: exchange, now: now)
            case .end(let trailers):
                return requestEnd(trailers, now: now)
            }
        case .modifying:
            preconditionFailure("received a part while modifying")
        }
    }

    /// Routing needs the app's proxy credential checked off the event loop
    /// first: the head waits in `authenticating`, reading nothing more.
    mutating func authenticationPending(_ head: AppRequestHead) {
        guard case .idle = state else { preconditionFailure("authenticating a head in state \(state)") }
        state = .authenticating(head)
    }

    /// Whether a head still waits for its credential check (not closed meanwhile).
    var isAuthenticating: Bool {
        if case .authenticating = state { return true }
        return false
    }

    /// The routing decision for the head `received` asked to route. After
    /// `authenticationPending`, the parts that waited meanwhile come next
    /// from `nextQueuedPart`.
    mutating func routed(_ head: AppRequestHead, _ decision: RoutingDecision, now: NIODeadline) -> Action {
        switch state {
        case .idle, .authenticating: state = .idle
        default: preconditionFailure("routed a head in state \(state)")
        }
        lastRoutedIdentity = decision.identity
        let exchange = Exchange(head: head, decision: decision, started: now, closeAfter: !head.isKeepAlive || shuttingDown)
        if let framing = exchange.framing, framing != .none, idleTimeout > .zero {
            // A body must keep arriving, even one that is only read to be dropped.
            exchange.bodyDeadline = now + idleTimeout
        }
        switch decision.result {
        case .failure(let refusal):
            return refuse(exchange, refusal, release: nil)
        case .success(let route):
            state = .acquiring(exchange, route)
            return .acquireUpstream(route)
        }
    }

    private mutating func requestBody(_ body: ByteBuffer, of current: Exchange, now: NIODeadline) -> Action {
        // Bytes beyond what the head framed would reach the upstream as the
        // start of another request (smuggling): nothing of them goes up. The
        // HTTP/1 decoder never yields them; an HTTP/2 stream could.
        if let framing = current.framing, let excess = framing.excess(after: current.bytesUp, receiving: body.readableBytes) {
            return refuseAndClose(ProxyError(.badRequest, host: current.host.isEmpty ? nil : current.host, detail: excess), now: now)
        }
        let idleTimeout = self.idleTimeout
        return modify { exchange, upstream in
            exchange.bytesUp += body.readableBytes
            if exchange.bodyDeadline != nil { exchange.bodyDeadline = now + idleTimeout }
            exchange.replay.keep(body, limit: Self.replayLimit)
            switch upstream {
            case .sending(let upstream): return .forwardBody(body, to: upstream)
            case .holding: exchange.pending.append(body); return .none
            case .none: return .none  // dropped: the response is done or refused
            }
        }
    }

    private mutating func requestEnd(_ trailers: HTTPHeaders?, now: NIODeadline) -> Action {
        switch state {
        case .responded(let exchange), .refused(let exchange):
            exchange.request = .ended
            exchange.bodyDeadline = nil
            return finish(exchange)
        default:
            return modify { exchange, upstream in
                exchange.request = .ended
                exchange.bodyDeadline = nil
                switch upstream {
                case .sending(let upstream):
                    if !exchange.responseStarted { exchange.responseDeadline = now + exchange.responseTimeout }
                    return .forwardEnd(trailers, to: upstream)
                case .holding:
                    exchange.pending.end(trailers)
                    return .none
                case .none:
                    return .none
                }
            }
        }
    }

    /// The decoder failed (malformed request, oversize head): 400/431, then close.
    mutating func parserFailed(_ refusal: ProxyError, now: NIODeadline) -> Action {
        refuseAndClose(refusal, now: now)
    }

    private mutating func refuseAndClose(_ refusal: ProxyError, now: NIODeadline = .now()) -> Action {
        switch takeExchange() {
        case .some((let exchange, let upstream)):
            exchange.closeAfter = true
            return refuse(exchange, refusal, release: upstream)
        case .none:
            switch state {
            case .idle, .authenticating: break
            default: return .none
            }
            let placeholder = AppRequestHead.whole(HTTPRequestHead(version: .http1_1, method: .GET, uri: "-"))
            let exchange = Exchange(head: placeholder, decision: RoutingDecision(host: "-", policy: nil, result: .failure(refusal)),
                                    started: now, closeAfter: true)
            return refuse(exchange, refusal, release: nil)
        }
    }

    /// The app closed its connection.
    mutating func clientClosed() -> Action {
        // Between the `101` and the splice: setting it up finds the app gone,
        // and `spliceFailed` logs the exchange (once).
        if case .spliced = state { return .none }
        let taken = takeExchange()
        state = .closed
        guard case .some((let exchange, let upstream)) = taken else { return .clientGone(release: nil, finished: nil) }
        if exchange.status == nil { exchange.status = 499 }
        return .clientGone(release: upstream, finished: exchange)
    }

    /// pinproxy is shutting down: an idle connection closes now, a busy one
    /// after its current response.
    mutating func shutdownRequested() -> Action {
        shuttingDown = true
        if case .idle = state {
            state = .closed
            return .closeClient
        }
        return .none
    }

    private mutating func queue(_ part: AppRequestPart) {
        if queued == nil { queued = CircularBuffer(initialCapacity: 4) }
        queued!.append(part)
    }

    /// The next queued part, when the connection is ready for it: a head when
    /// idle, or more of the request in progress.
    mutating func nextQueuedPart() -> AppRequestPart? {
        guard hasQueuedParts else { return nil }
        switch state {
        case .idle:
            return queued!.removeFirst()
        case .acquiring(let exchange, _), .authorizing(let exchange, _, _), .forwarding(let exchange, _, _),
             .discardingRefusal(let exchange, _, _), .responded(let exchange), .refused(let exchange):
            return exchange.requestEnded ? nil : queued!.removeFirst()
        case .authenticating, .closed, .handedOver, .switching, .spliced, .modifying:
            return nil
        }
    }
}

