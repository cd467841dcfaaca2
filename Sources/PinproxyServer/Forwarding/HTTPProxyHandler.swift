import Logging
import NIOCore
import NIOHTTP1
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS

/// The HTTP side of a client connection: on the listener (front) it takes
/// CONNECT and absolute-form requests; inside an intercepted session it takes
/// the app's requests for the CONNECT host. Either way it routes each request
/// by policy, borrows an upstream connection, and streams both directions
/// with backpressure. One exchange at a time; pipelined requests wait.
final class HTTPProxyHandler: ChannelInboundHandler, RemovableChannelHandler, UpstreamResponseReceiver, DeadlineWatcher {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where the connection stands. Requests inside one state live in `Exchange`.
    enum Mode {
        case front
        case intercepted(Interception)
    }

    struct Interception {
        var host: String
        var port: Int
        var policy: HostPolicy
    }

    private enum State {
        case idle
        case exchange(Exchange)
        /// CONNECT accepted: the pipeline is being rebuilt; raw bytes pass through.
        case upgrading
        case closed
    }

    let services: ProxyServices
    let mode: Mode
    let clientAddress: String
    let headTimer: RequestHeadTimer
    let limits: PinproxyConfig.Limits
    private var state: State = .idle
    /// Parts of pipelined requests that arrived while an exchange was in progress.
    private var queued = CircularBuffer<HTTPServerRequestPart>()
    private var context: ChannelHandlerContext?
    private var sweeper: DeadlineSweeper?
    private var shuttingDown = false
    /// Inside a burst of `channelRead`s: writes to the upstream wait for the
    /// `channelReadComplete` flush, so a request read at once leaves in one
    /// TLS write instead of one per part.
    private var inReadBurst = false
    /// The server name the app sent in its TLS hello (intercepted sessions).
    var clientSNI: String?

    init(services: ProxyServices, mode: Mode, clientAddress: String, headTimer: RequestHeadTimer, limits: PinproxyConfig.Limits) {
        self.services = services
        self.mode = mode
        self.clientAddress = clientAddress
        self.headTimer = headTimer
        self.limits = limits
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        sweeper = DeadlineSweeper.current(on: context.eventLoop)
        sweeper?.watch(self)
        if context.channel.isActive { context.read() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        sweeper?.unwatch(self)
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        sweeper?.unwatch(self)
        if case .exchange(let exchange) = state {
            // The app went away mid-exchange: give the upstream back (not reusable).
            exchange.responseDeadline = nil
            if let upstream = exchange.upstream {
                upstream.reusable = false
                services.pool.release(upstream)
            }
            exchange.phase = .refused
            if exchange.status == nil { exchange.status = 499 }
            logAccess(exchange)
        }
        state = .closed
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .upgrading:
            context.fireChannelRead(data)  // bytes after a CONNECT head belong to the next layer
        case .closed:
            return
        case .idle, .exchange:
            inReadBurst = true
            handle(unwrapInboundIn(data), context: context)
        }
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch state {
        case .idle:
            guard case .head(let head) = part else { return }  // a stray part after a refusal closed the request
            begin(head, context: context)
        case .exchange(let exchange):
            if exchange.requestEnded {
                queued.append(part)  // the next pipelined request waits its turn
                return
            }
            switch part {
            case .head:
                // The decoder ends a request before the next head; if the two ever
                // disagree, the connection is refused, not the process.
                refuseAndClose(ProxyError(.badRequest, host: nil, detail: "a request head arrived inside a request"), context: context)
            case .body(let body):
                requestBody(body, exchange: exchange)
            case .end(let trailers):
                requestEnd(trailers, exchange: exchange, context: context)
            }
        case .upgrading, .closed:
            return
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        inReadBurst = false
        guard case .exchange(let exchange) = state else {
            // Between requests, a head may span several reads: keep asking for the rest.
            if case .idle = state { context.read() }
            context.fireChannelReadComplete()
            return
        }
        switch exchange.phase {
        case .forwarding(let upstream):
            upstream.flush()
            // Once the request has ended, nothing more is read until the response
            // is done: a client that half-closes after its request (HTTP/1.0
            // style) still gets its answer, as before. Reading ahead saved ~3% of
            // CPU (epoll_ctl) but turned that EOF into an abort (bench/README.md).
            if !exchange.requestEnded && upstream.isWritable { context.read() }
        case .draining, .refused:
            if !exchange.requestEnded { context.read() }
        case .connecting, .authorizing:
            break  // no more body until the head has gone up
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case .exchange(let exchange) = state, case .forwarding(let upstream) = exchange.phase, exchange.responseStarted {
            upstream.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted = event as? TLSUserEvent {
            services.instrumentation.clientHandshake(.ok)
        }
        if event is ProxyShutdownEvent {
            shuttingDown = true
            if case .idle = state { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case .closed = state { return }  // already answered and closing
        switch error {
        case let parser as HTTPParserError:
            let refusal = parser == .headerOverflow
                ? ProxyError(.badRequest, host: nil, detail: "request head larger than max_header_bytes (\(limits.maxHeaderBytes) bytes)", status: .requestHeaderFieldsTooLarge)
                : ProxyError(.badRequest, host: nil, detail: "malformed HTTP request: \(parser)")
            refuseAndClose(refusal, context: context)
        case let tls as TLSError:
            clientTLSFailed(tls)
            context.close(promise: nil)
        default:
            services.logger.debug("client connection error", metadata: ["client": "\(clientAddress)", "error": "\(error)"])
            context.close(promise: nil)
        }
    }

    // MARK: A new request

    private func begin(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        headTimer.headComplete()
        let exchange = Exchange(request: head, host: "", mode: modeLabel, closeAfter: MessageRules.wantsClose(head) || shuttingDown)
        state = .exchange(exchange)
        do {
            // The decoder's limit counts names and values only; the whole head counts.
            if MessageRules.wireSize(head) > limits.maxHeaderBytes {
                exchange.closeAfter = true
                throw ProxyError(.badRequest, host: nil, detail: "request head larger than max_header_bytes (\(limits.maxHeaderBytes) bytes)",
                                 status: .requestHeaderFieldsTooLarge)
            }
            switch RequestFraming.of(head) {
            case .success(let framing):
                exchange.framing = framing
                if framing != .none && head.method != .CONNECT && limits.idleTimeout > .zero {
                    // A body must keep arriving: a stalled one is cut after idle_timeout.
                    exchange.bodyDeadline = .now() + TimeAmount(limits.idleTimeout)
                }
            case .failure(let problem):
                exchange.closeAfter = true
                throw ProxyError(.badRequest, host: nil, detail: "ambiguous message framing: \(problem.message)")
            }
            switch mode {
            case .front:
                if head.method == .CONNECT {
                    try beginConnect(head, exchange: exchange, context: context)
                } else {
                    try routeAbsoluteForm(head, exchange: exchange)
                    acquireUpstream(exchange, context: context)
                }
            case .intercepted(let interception):
                try routeIntercepted(head, interception: interception, exchange: exchange)
                acquireUpstream(exchange, context: context)
            }
        } catch let refusal as ProxyError {
            refuse(exchange, refusal, context: context)
        } catch {
            refuse(exchange, ProxyError(.badRequest, host: nil, detail: "\(error)"), context: context)
        }
    }

    private var modeLabel: String {
        switch mode {
        case .front: return "forward"
        case .intercepted: return "intercept"
        }
    }

    /// `GET http://host/path` through `HTTP_PROXY`.
    private func routeAbsoluteForm(_ head: HTTPRequestHead, exchange: Exchange) throws {
        guard let target = AbsoluteTarget(head.uri) else {
            throw ProxyError(.badRequest, host: nil, detail: "pinproxy is a forward proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port")
        }
        let host = try Authority.routingHost(target.authority.host)
        let port = target.authority.port ?? target.defaultPort
        exchange.host = host
        let snapshot = services.store.snapshot
        let policy = snapshot.policy(forHost: host)
        exchange.policy = policy
        try checkAllowed(host: host, policy: policy, snapshot: snapshot)
        let tls = target.scheme == "https" || (policy?.spec.upgradeToTLS ?? false)
        if tls && policy == nil {
            throw ProxyError(.badRequest, host: host, detail: "no policy covers \(host): send https requests through CONNECT")
        }
        // Upgraded to TLS, the default port is HTTPS's.
        let upstreamPort = (tls && target.scheme == "http" && target.authority.port == nil) ? 443 : port
        exchange.plan = plan(host: host, port: upstreamPort, tls: tls, policy: policy)
        let hostHeader = target.authority.port.map { "\(target.authority.host):\($0)" } ?? target.authority.host
        var request = head
        request.headers.replaceOrAdd(name: "Host", value: hostHeader)
        exchange.upstreamHead = MessageRules.upstreamHead(from: request, target: target.originForm, hostHeader: hostHeader, rules: policy?.spec.headers, framing: exchange.framing)
    }

    /// A request inside an intercepted session: its Host must be the CONNECT host.
    private func routeIntercepted(_ head: HTTPRequestHead, interception: Interception, exchange: Exchange) throws {
        exchange.host = interception.host
        exchange.policy = interception.policy
        if head.method == .CONNECT {
            throw ProxyError(.badRequest, host: interception.host, detail: "CONNECT inside an intercepted session")
        }
        var originForm = head.uri
        var authorities: [Authority] = []
        if let target = AbsoluteTarget(head.uri) {
            authorities.append(target.authority)
            originForm = target.originForm
        }
        let hostHeaders = head.headers["host"]
        guard hostHeaders.count == 1, let hostHeader = Authority(hostHeaders[0]) else {
            exchange.closeAfter = exchange.closeAfter || hostHeaders.count > 1
            throw ProxyError(.badRequest, host: interception.host, detail: hostHeaders.isEmpty ? "the request has no Host header" : "the request has \(hostHeaders.count) Host headers")
        }
        authorities.append(hostHeader)
        for authority in authorities {
            let portMatches = authority.port == nil ? interception.port == 443 : authority.port == interception.port
            guard authority.sameHost(as: interception.host) && portMatches else {
                throw ProxyError(.hostMismatch, host: interception.host,
                                 detail: "this session was opened with CONNECT \(interception.host):\(interception.port); Host \(hostHeaders[0]) belongs elsewhere")
            }
        }
        guard originForm.hasPrefix("/") || originForm == "*" else {
            throw ProxyError(.badRequest, host: interception.host, detail: "request target \"\(head.uri)\" is not origin-form")
        }
        exchange.plan = plan(host: interception.host, port: interception.port, tls: true, policy: interception.policy)
        exchange.upstreamHead = MessageRules.upstreamHead(from: head, target: originForm, hostHeader: hostHeaders[0], rules: interception.policy.spec.headers, framing: exchange.framing)
    }

    /// Deny by policy or by default (checks that need no upstream).
    func checkAllowed(host: String, policy: HostPolicy?, snapshot: PolicySnapshot) throws {
        if let policy {
            if policy.spec.action == .deny {
                throw ProxyError(.hostDenied, host: host, detail: "policy \(policy.metricLabel) (\(policy.spec.file)) denies \(host)")
            }
        } else if snapshot.defaultAction == .deny {
            throw ProxyError(.hostDenied, host: host, detail: "no policy matches \(host) and default_action is deny")
        }
    }

    func plan(host: String, port: Int, tls: Bool, policy: HostPolicy?) -> DialPlan {
        let spec = policy?.spec
        let targets = (spec?.upstream.isEmpty ?? true) ? [HostPort(host: host, port: port)] : spec!.upstream
        return DialPlan(
            host: host, port: port, targets: targets, tls: tls, policy: policy,
            retries: spec?.retries ?? 2,
            connectTimeout: TimeAmount(spec?.connectTimeout ?? .seconds(5)),
            handshakeTimeout: TimeAmount(spec?.handshakeTimeout ?? .seconds(5)))
    }

    // MARK: Upstream

    private func acquireUpstream(_ exchange: Exchange, context: ChannelHandlerContext) {
        guard let plan = exchange.plan else { preconditionFailure("acquiring an upstream without a plan") }
        services.checkout(plan, on: context.eventLoop).map { ($0.connection, $0.reused) }
            .assumeIsolated().whenComplete { result in
                self.upstreamReady(exchange, result: result, context: context)
            }
    }

    private func upstreamReady(_ exchange: Exchange, result: Result<(UpstreamConnection, Bool), any Error>, context: ChannelHandlerContext) {
        guard case .exchange(let current) = state, current === exchange, case .connecting = exchange.phase else {
            // The client left, or the exchange was refused meanwhile.
            if case .success(let (connection, _)) = result { services.pool.release(connection) }
            return
        }
        switch result {
        case .failure(let error):
            let refusal = UpstreamConnector.refusal(for: error, host: exchange.host)
            // The access line names the pin verdict of a refused handshake too.
            switch refusal.code {
            case .pinMismatch: exchange.pinVerdict = PinValidationResult.mismatchEnforced.rawValue
            case .pinsExpired: exchange.pinVerdict = PinValidationResult.noActivePins.rawValue
            default: break
            }
            refuse(exchange, refusal, context: context)
        case .success(let (connection, reused)):
            exchange.reusedConnection = reused
            exchange.upstreamAddress = connection.remoteAddress
            exchange.pinVerdict = connection.pinEvaluation?.verdict.metricLabel
            exchange.phase = .authorizing(connection)
            connection.receiver = self
            authorize(exchange, connection: connection, context: context)
        }
    }

    /// `auth.spotify`: the client's Authorization goes (replace_client_auth), and
    /// a bearer token is attached only over a connection whose pins permit it
    /// (DESIGN §7) — never over plain HTTP.
    private func authorize(_ exchange: Exchange, connection: UpstreamConnection, context: ChannelHandlerContext) {
        guard let auth = exchange.policy?.spec.auth, var head = exchange.upstreamHead else {
            sendRequest(exchange, connection: connection, context: context)
            return
        }
        let verdict = connection.pinEvaluation?.verdict
        // TRACE echoes the request back to the app (RFC 9110 §9.3.8): a token
        // attached to it would be handed to the app, so TRACE never gets one.
        let isTrace = exchange.request.method == .TRACE
        let permitted = !isTrace && exchange.plan?.tls == true && (verdict?.permitsTokenAttachment(attachUnpinned: auth.attachUnpinned) ?? false)
        if auth.replaceClientAuth || permitted {
            head.headers.remove(name: "Authorization")  // never a mix of the client's and ours
        }
        guard permitted else {
            services.logger.warning(isTrace ? "bearer token not attached to TRACE: its response echoes the request"
                                            : "bearer token not attached: the upstream's pins did not permit it", metadata: [
                "host": "\(exchange.host)", "policy": "\(exchange.policyLabel)", "verdict": "\(verdict?.metricLabel ?? "no TLS")",
            ])
            exchange.upstreamHead = head
            sendRequest(exchange, connection: connection, context: context)
            return
        }
        guard let tokens = services.tokens.provider else {
            refuse(exchange, ProxyError(.tokenUnavailable, host: exchange.host, detail: "no token sessions are configured for \(auth.spotifySession)"), context: context)
            return
        }
        let session = auth.spotifySession
        context.eventLoop.makeFutureWithTask {
            try await tokens.token(session: session)
        }.assumeIsolated().whenComplete { result in
            guard case .exchange(let current) = self.state, current === exchange, case .authorizing(let held) = exchange.phase, held === connection else {
                return  // the client went away meanwhile
            }
            switch result {
            case .success(let token):
                head.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(token.reveal())")
                exchange.upstreamHead = head
                exchange.tokenGeneration = token.generation
                self.sendRequest(exchange, connection: connection, context: context)
            case .failure(let error):
                // The error says why (accounts down, misconfigured, needs re-authorisation), never a secret.
                self.refuse(exchange, ProxyError(.tokenUnavailable, host: exchange.host,
                                                 detail: "no token for session \(session): \(error)"), context: context)
            }
        }
    }

    private func sendRequest(_ exchange: Exchange, connection: UpstreamConnection, context: ChannelHandlerContext) {
        exchange.phase = .forwarding(connection)
        connection.write(.head(exchange.upstreamHead!))
        for part in exchange.pending {
            switch part {
            case .body(let body): connection.write(.body(.byteBuffer(body)))
            case .end(let trailers): connection.write(.end(trailers))
            case .head: preconditionFailure("a head among pending body parts")
            }
        }
        exchange.pending.removeAll()
        if !inReadBurst { connection.flush() }  // else channelReadComplete flushes
        if exchange.requestEnded {
            startResponseTimer(exchange)
        } else {
            context.read()
        }
        connection.read()
    }

    private func requestBody(_ body: ByteBuffer, exchange: Exchange) {
        exchange.bytesUp += body.readableBytes
        if exchange.bodyDeadline != nil { exchange.bodyDeadline = .now() + TimeAmount(limits.idleTimeout) }
        if exchange.policy?.spec.auth != nil, exchange.replayBody != nil {
            // Kept so that a 401 can be answered by a replay with a fresh token.
            exchange.replayBodyBytes += body.readableBytes
            if exchange.replayBodyBytes <= Exchange.replayLimit {
                exchange.replayBody!.append(body)
            } else {
                exchange.replayBody = nil
            }
        }
        switch exchange.phase {
        case .connecting, .authorizing: exchange.pending.append(.body(body))
        case .forwarding(let upstream): upstream.write(.body(.byteBuffer(body)))
        case .draining, .refused: break
        }
    }

    private func requestEnd(_ trailers: HTTPHeaders?, exchange: Exchange, context: ChannelHandlerContext) {
        exchange.requestEnded = true
        exchange.bodyDeadline = nil
        if let decision = exchange.connect, case .connecting = exchange.phase {
            carryOut(decision, exchange: exchange, context: context)
            return
        }
        switch exchange.phase {
        case .connecting, .authorizing:
            exchange.pending.append(.end(trailers))
        case .forwarding(let upstream):
            upstream.write(.end(trailers))
            if !inReadBurst { upstream.flush() }
            if !exchange.responseStarted { startResponseTimer(exchange) }
        case .draining:
            finish(exchange, context: context)
        case .refused:
            if exchange.closeAfter {
                return  // the refusal closes the connection once written
            }
            finish(exchange, context: context)
        }
    }

    private func startResponseTimer(_ exchange: Exchange) {
        exchange.responseDeadline = .now() + responseTimeout(exchange)
    }

    private func responseTimeout(_ exchange: Exchange) -> TimeAmount {
        TimeAmount(exchange.plan?.policy?.spec.responseTimeout ?? .seconds(30))
    }

    func checkDeadlines(now: NIODeadline) {
        guard let context, case .exchange(let exchange) = state else { return }
        if let deadline = exchange.bodyDeadline, deadline <= now {
            requestBodyStalled(exchange, now: now, context: context)
        } else if let deadline = exchange.responseDeadline, deadline <= now {
            upstreamStalled(exchange, now: now, context: context)
        }
    }

    /// No byte of the request body for `idle_timeout` while pinproxy was
    /// reading: the body is cut (408), its upstream connection discarded and
    /// its pool slot freed, so a silent client cannot hold a host's slots.
    private func requestBodyStalled(_ exchange: Exchange, now: NIODeadline, context: ChannelHandlerContext) {
        let idle = TimeAmount(limits.idleTimeout)
        switch exchange.phase {
        case .connecting, .authorizing:
            exchange.bodyDeadline = now + idle  // pinproxy is not reading yet
            return
        case .forwarding(let upstream) where !upstream.isWritable:
            exchange.bodyDeadline = now + idle  // the upstream holds the body back, not the client
            return
        case .forwarding, .draining, .refused:
            break
        }
        exchange.bodyDeadline = nil
        services.logger.warning("request body stalled; cutting the exchange", metadata: [
            "client": "\(clientAddress)", "host": "\(exchange.host)", "bytes_up": "\(exchange.bytesUp)",
        ])
        exchange.closeAfter = true
        refuse(exchange, ProxyError(.badRequest, host: exchange.host.isEmpty ? nil : exchange.host,
                                    detail: "the request body made no progress for \(idle.seconds) s (limits.idle_timeout)",
                                    status: .requestTimeout), context: context)
    }

    /// `response_timeout` ran out waiting for the upstream: for the head (504),
    /// or between two reads of the body (the app's connection is cut, so the
    /// response cannot look complete).
    private func upstreamStalled(_ exchange: Exchange, now: NIODeadline, context: ChannelHandlerContext) {
        exchange.responseDeadline = nil
        guard case .forwarding = exchange.phase else { return }
        let timeout = responseTimeout(exchange)
        if exchange.responseStarted {
            guard context.channel.isWritable else {
                exchange.responseDeadline = now + timeout  // reads are withheld for a slow app, not stalled upstream
                return
            }
            abortResponse(exchange, failure: "upstream_timeout",
                          detail: "no more of the response within \(timeout.seconds) s (response_timeout)", context: context)
            return
        }
        refuse(exchange, ProxyError(.upstreamTimeout, host: exchange.host,
                                    detail: "no response from \(exchange.host) within \(timeout.seconds) s (response_timeout)"), context: context)
    }

    /// The response was cut short after its head went to the app: the app's
    /// connection closes without completing it (never padded, never reused),
    /// and the access line says what happened.
    private func abortResponse(_ exchange: Exchange, failure: String, detail: String, context: ChannelHandlerContext) {
        services.logger.warning("response cut short", metadata: [
            "host": "\(exchange.host)", "client": "\(clientAddress)", "bytes_down": "\(exchange.bytesDown)", "reason": "\(detail)",
        ])
        if let upstream = exchange.upstream {
            upstream.receiver = nil
            upstream.reusable = false
            services.pool.release(upstream)
        }
        exchange.responseDeadline = nil
        exchange.bodyDeadline = nil
        exchange.failure = failure
        exchange.closeAfter = true
        exchange.phase = .refused
        state = .closed
        logAccess(exchange)
        context.flush()
        context.close(promise: nil)
    }

    // MARK: UpstreamResponseReceiver

    func upstreamReceived(_ part: HTTPClientResponsePart) {
        guard let context, case .exchange(let exchange) = state, case .forwarding(let upstream) = exchange.phase else { return }
        if exchange.discardingResponse {
            discardRejectedResponse(part, exchange: exchange, upstream: upstream, context: context)
            return
        }
        switch part {
        case .head(let head) where head.status == .unauthorized && shouldReplayAfter401(exchange):
            // The token was refused: that generation goes, the 401 is swallowed,
            // and the request is sent once more with a fresh token.
            exchange.responseDeadline = nil
            exchange.replayedAfter401 = true
            exchange.discardingResponse = true
            if !MessageRules.upstreamKeepsAlive(head) { upstream.reusable = false }
            if let session = exchange.policy?.spec.auth?.spotifySession, let generation = exchange.tokenGeneration {
                services.tokens.provider?.invalidate(session: session, generation: generation)
            }
            services.logger.info("upstream refused the token; refreshing and replaying once", metadata: [
                "host": "\(exchange.host)", "policy": "\(exchange.policyLabel)",
            ])
        case .head(let head) where head.status == .switchingProtocols:
            // pinproxy asked for no upgrade (it strips `Upgrade`): a 101 means the
            // upstream's framing is unknowable from here, so the connection ends
            // with this exchange and never returns to the pool.
            upstream.receiver = nil
            upstream.reusable = false
            upstream.close()
            refuse(exchange, ProxyError(.connectFailed, host: exchange.host,
                                        detail: "upstream \(exchange.host) answered 101 Switching Protocols to a request that asked for no upgrade"), context: context)
        case .head(let head):
            if head.status.code >= 100 && head.status.code < 200 {
                // 100 Continue and friends go to the client as they are.
                context.write(wrapOutboundOut(.head(MessageRules.clientHead(from: head, closing: false))), promise: nil)
                return
            }
            exchange.responseDeadline = .now() + responseTimeout(exchange)  // now between body reads
            exchange.responseStarted = true
            exchange.status = Int(head.status.code)
            if !MessageRules.upstreamKeepsAlive(head) { upstream.reusable = false }
            context.write(wrapOutboundOut(.head(MessageRules.clientHead(from: head, closing: exchange.closeAfter))), promise: nil)
        case .body(let body):
            exchange.bytesDown += body.readableBytes
            exchange.responseDeadline = .now() + responseTimeout(exchange)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        case .end(let trailers):
            if !exchange.requestEnded {
                // The upstream answered before the body was sent (413, 401…): that
                // connection's framing is now unknowable, so it is not reused.
                upstream.reusable = false
            }
            upstream.receiver = nil
            services.pool.release(upstream)
            exchange.responseDeadline = nil
            exchange.phase = .draining
            let closeAfter = exchange.closeAfter
            context.writeAndFlush(wrapOutboundOut(.end(trailers))).assumeIsolated().whenComplete { _ in
                if closeAfter { context.close(promise: nil) }
            }
            if exchange.requestEnded { finish(exchange, context: context) } else { context.read() }
        }
    }

    private func shouldReplayAfter401(_ exchange: Exchange) -> Bool {
        exchange.tokenGeneration != nil && !exchange.replayedAfter401 && exchange.requestEnded && exchange.replayBody != nil
    }

    /// Drops the rejected 401's body; at its end, sends the request again.
    private func discardRejectedResponse(_ part: HTTPClientResponsePart, exchange: Exchange, upstream: UpstreamConnection, context: ChannelHandlerContext) {
        guard case .end = part else { return }
        upstream.receiver = nil
        services.pool.release(upstream)
        exchange.discardingResponse = false
        exchange.tokenGeneration = nil
        exchange.phase = .connecting
        exchange.pending = (exchange.replayBody ?? []).map { .body($0) } + [.end(nil)]
        acquireUpstream(exchange, context: context)
    }

    func upstreamReadComplete() {
        guard let context, case .exchange(let exchange) = state, case .forwarding(let upstream) = exchange.phase else { return }
        context.flush()
        if context.channel.isWritable { upstream.read() }
    }

    func upstreamWritabilityChanged() {
        guard let context, case .exchange(let exchange) = state, case .forwarding(let upstream) = exchange.phase else { return }
        if upstream.isWritable && !exchange.requestEnded { context.read() }
    }

    func upstreamClosed(_ error: (any Error)?) {
        guard let context, case .exchange(let exchange) = state else { return }
        switch exchange.phase {
        case .authorizing(let connection):
            // Lost while the token was fetched: nothing was written, so another
            // connection may carry the request, whatever its method (once).
            connection.reusable = false
            services.pool.release(connection)
            exchange.phase = .connecting
            guard !exchange.retried else { break }
            exchange.retried = true
            acquireUpstream(exchange, context: context)
            return
        case .forwarding:
            break
        case .connecting, .draining, .refused:
            return
        }
        exchange.responseDeadline = nil
        if exchange.responseStarted {
            let detail = error.map { "upstream failed mid-response: \(UpstreamConnector.describe($0))" } ?? "upstream closed mid-response"
            abortResponse(exchange, failure: "upstream_closed", detail: detail, context: context)
            return
        }
        if exchange.retryableAfterLoss(error) {
            // A pooled connection the server had already closed: once more, on a fresh one.
            exchange.retried = true
            exchange.phase = .connecting
            exchange.pending = [.end(nil)]
            acquireUpstream(exchange, context: context)
            return
        }
        exchange.phase = .refused
        if let tls = error as? TLSError, case .tlsHandshake = tls {
            // The upstream ended its TLS before answering (a TLS 1.3 server that
            // wanted a client certificate): a TLS failure, named as one.
            refuse(exchange, ProxyError.tls(tls, host: exchange.host), context: context)
            return
        }
        let detail = error.map { "upstream \(exchange.host) failed before responding: \(UpstreamConnector.describe($0))" }
            ?? "upstream \(exchange.host) closed the connection before responding"
        refuse(exchange, ProxyError(.connectFailed, host: exchange.host, detail: detail), context: context)
    }

    // MARK: Ending an exchange

    /// Sends the refusal of DESIGN §4 (status, `X-Pinproxy-Error`, JSON body).
    func refuse(_ exchange: Exchange, _ error: ProxyError, context: ChannelHandlerContext) {
        exchange.responseDeadline = nil
        if let upstream = exchange.upstream {
            upstream.receiver = nil
            upstream.reusable = false
            services.pool.release(upstream)
        }
        exchange.phase = .refused
        exchange.error = error
        exchange.status = Int(error.status.code)
        if exchange.host.isEmpty, let host = error.host { exchange.host = host }
        services.instrumentation.denied(code: error.code)
        if exchange.responseStarted {
            exchange.closeAfter = true
            logAccess(exchange)
            state = .closed
            context.close(promise: nil)
            return
        }
        exchange.responseStarted = true
        // An unread request body on a refused request: close rather than read it all.
        if !exchange.requestEnded && exchange.request.headers["content-length"].first.flatMap(Int.init) ?? 1 > 65_536 {
            exchange.closeAfter = true
        }
        if error.code == .badRequest { exchange.closeAfter = true }
        // The state and the access line come before the writes: a write may
        // complete at once and close the channel, and `channelInactive` must
        // then find the exchange already accounted for (one line, one count).
        if exchange.request.method == .CONNECT {
            // NIO's encoder drops the body of any response to CONNECT; a refusal
            // must still carry its JSON, so it goes out as bytes, and the connection closes.
            exchange.closeAfter = true
            state = .closed
            logAccess(exchange)
            writeRawRefusal(error, context: context)
            return
        }
        let closeAfter = exchange.closeAfter
        if closeAfter {
            state = .closed
            logAccess(exchange)
        }
        writeRefusal(error, close: closeAfter, context: context)
        if closeAfter {
            return
        } else if exchange.requestEnded {
            finish(exchange, context: context)
        } else {
            context.read()  // drain the body, then take the next request
        }
    }

    private func writeRefusal(_ error: ProxyError, close: Bool, context: ChannelHandlerContext) {
        let body = RefusalBody.json(error)
        let head = RefusalBody.head(error, bodyLength: body.utf8.count, close: close)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            if close { LingeringClose.close(context.channel) }
        }
    }

    /// Writes a whole refusal below the HTTP encoder, then closes.
    private func writeRawRefusal(_ error: ProxyError, context: ChannelHandlerContext) {
        let bytes = ByteBuffer(string: RefusalBody.raw(error))
        guard let encoder = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        encoder.writeAndFlush(NIOAny(bytes)).assumeIsolated().whenComplete { _ in
            LingeringClose.close(channel)
        }
    }

    /// A refusal outside an exchange (a malformed head): answer, then close.
    private func refuseAndClose(_ error: ProxyError, context: ChannelHandlerContext) {
        services.instrumentation.denied(code: error.code)
        let exchange: Exchange
        if case .exchange(let current) = state {
            exchange = current
            if let upstream = exchange.upstream {
                // Not reusable: its framing is unknown. (channelInactive skips a closed state.)
                upstream.receiver = nil
                upstream.reusable = false
                services.pool.release(upstream)
                exchange.phase = .refused
            }
            if exchange.responseStarted {
                state = .closed
                context.close(promise: nil)
                return
            }
        } else {
            exchange = Exchange(request: HTTPRequestHead(version: .http1_1, method: .GET, uri: "-"), host: "-", mode: modeLabel, closeAfter: true)
        }
        exchange.error = error
        exchange.status = Int(error.status.code)
        exchange.responseStarted = true
        exchange.phase = .refused
        state = .closed
        logAccess(exchange)
        writeRefusal(error, close: true, context: context)
    }

    /// The exchange is complete in both directions: log it and take the next request.
    private func finish(_ exchange: Exchange, context: ChannelHandlerContext) {
        logAccess(exchange)
        guard case .exchange(let current) = state, current === exchange else { return }
        if exchange.closeAfter {
            state = .closed
            return  // the last write closes the connection
        }
        state = .idle
        headTimer.connectionIsIdle()
        if shuttingDown {
            context.close(promise: nil)
            return
        }
        // Pipelined requests that arrived meanwhile go first: the next head, and
        // the rest of its request (body, end) while that request is unfinished.
        while let part = queued.first, takesQueuedParts {
            queued.removeFirst()
            handle(part, context: context)
        }
        if case .idle = state { context.read() }
    }

    /// Whether the next queued part belongs to now: a new head when idle, or
    /// more of the request in progress.
    private var takesQueuedParts: Bool {
        switch state {
        case .idle: return true
        case .exchange(let exchange): return !exchange.requestEnded
        case .upgrading, .closed: return false
        }
    }

    func logAccess(_ exchange: Exchange) {
        let status = exchange.status ?? 0
        services.instrumentation.requestCompleted(policy: exchange.policy, status: status, seconds: exchange.elapsedSeconds)
        services.instrumentation.bytes(policy: exchange.policy, up: exchange.bytesUp, down: exchange.bytesDown)
        AccessRecord(
            client: clientAddress, method: exchange.request.method.rawValue, host: exchange.host.isEmpty ? "-" : exchange.host,
            path: exchange.request.uri, status: status, bytesUp: exchange.bytesUp, bytesDown: exchange.bytesDown,
            seconds: exchange.elapsedSeconds, policy: exchange.policyLabel, pin: exchange.pinVerdict,
            upstream: exchange.upstreamAddress, error: exchange.error?.code.rawValue ?? exchange.failure, mode: exchange.mode
        ).log(to: services.accessLog)
    }

    /// An app's TLS with pinproxy failed: counted, and said at warning level
    /// with the app's address, the CONNECT host and the SNI. An app that does
    /// not trust pinproxy's CA is the most common first-hour failure, and it
    /// must not be a quiet info line.
    private func clientTLSFailed(_ error: TLSError) {
        let result: ClientHandshakeResult
        switch error {
        case .certificateRejected: result = .untrustedCA
        case .tlsVersion: result = .tlsVersion
        case .tlsCipher: result = .tlsCipher
        case .verifyFailed, .tlsHandshake, .uncleanShutdown, .protocolFailure, .configuration: result = .tlsHandshake
        }
        var metadata: Logger.Metadata = ["client": "\(clientAddress)", "result": "\(result.rawValue)", "error": "\(error)"]
        if case .intercepted(let interception) = mode { metadata["connect_host"] = "\(interception.host)" }
        if let clientSNI { metadata["sni"] = "\(clientSNI)" }
        if result == .untrustedCA {
            metadata["hint"] = "the app does not trust pinproxy's CA: install the certificate from `pinproxy ca export` in its trust store"
        }
        services.instrumentation.clientHandshake(result)
        services.logger.warning("client TLS handshake failed", metadata: metadata)
    }

    // MARK: For the CONNECT extension

    /// Whether `exchange` is still the one in progress (the app has not left).
    func isCurrent(_ exchange: Exchange) -> Bool {
        if case .exchange(let current) = state { return current === exchange }
        return false
    }

    func enterUpgrading() {
        state = .upgrading
    }

    func markClosed() {
        state = .closed
    }
}

/// Sent down every client pipeline when pinproxy shuts down: idle connections
/// close now, busy ones after their current response.
struct ProxyShutdownEvent: Sendable {}
