import Logging
import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS

/// Carries out `ExchangeStateMachine`'s actions on a client connection: on
/// the listener it takes absolute-form requests (and hands a CONNECT to the
/// `ConnectHandler` after it); inside an intercepted session it takes the
/// app's requests for the CONNECT host. Every decision is the machine's;
/// this class turns channel events into machine events and actions into
/// writes, reads and pool calls.
final class HTTPExchangeHandler: ChannelInboundHandler, RemovableChannelHandler, UpstreamResponseReceiver, DeadlineWatcher {
    typealias InboundIn = AppRequestPart
    /// A CONNECT's parts, for the `ConnectHandler` after this one.
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    typealias Machine = ExchangeStateMachine<UpstreamConnection>

    let services: ProxyServices
    /// The intercepted session this handler serves (nil: the listener).
    let interception: RequestRouter.Interception?
    let clientAddress: String
    /// Nil on an HTTP/2 stream: the h2 connection's manager bounds idleness,
    /// and a stream's head arrives whole in one HEADERS block.
    let headTimer: RequestHeadTimer?
    let limits: PinproxyConfig.Limits
    var machine: Machine
    private var context: ChannelHandlerContext?
    private var sweeper: DeadlineSweeper?
    /// The HTTP/1.1 layers its builder added with it (`HTTP1ServerPipeline`),
    /// for a WebSocket splice to take out; nil on an HTTP/2 stream. They
    /// hold this handler, so it lets them go as it leaves the pipeline
    /// (`handlerRemoved`), or the pair would outlive the connection.
    var serverLayers: PipelineLayers?
    /// The HTTP/1.1 writer of those layers: told each request's method (an
    /// answer to `HEAD` or `CONNECT` has no body), and handed the heads
    /// forwarded as bytes. Nil on an HTTP/2 stream.
    var responseWriter: ResponseWriter?
    /// The app's HTTP/2 stream's adapter, sent an HTTP/2 upstream's head as
    /// its block, edited (`HTTP2StreamAdapter.writeForwarded`). Nil on an
    /// HTTP/1.1 connection.
    var streamAdapter: HTTP2StreamAdapter?
    /// The series of the policy this connection's requests went to last
    /// (outside an intercepted session: inside, the session keeps them).
    var traffic: (policy: HostPolicy?, recorder: any TrafficRecorder)?
    /// The HTTP/1.1 upstream connection the last exchange used, parked for
    /// the next (`UpstreamPool.park`): the pool may take it back meanwhile.
    var parked: UpstreamConnection?
    /// When it was parked: its idle time in the pool counts from then.
    var parkedAt = NIODeadline.uptimeNanoseconds(0)
    /// HTTP/1.1 on a connection, or one HTTP/2 stream (then without a head timer).
    let clientProtocol: ClientProtocol

    init(services: ProxyServices, interception: RequestRouter.Interception?, clientAddress: String,
         headTimer: RequestHeadTimer?, limits: PinproxyConfig.Limits, clientProtocol: ClientProtocol = .http1) {
        self.clientProtocol = clientProtocol
        self.services = services
        self.interception = interception
        self.clientAddress = clientAddress
        self.headTimer = headTimer
        self.limits = limits
        self.machine = Machine(idleTimeout: TimeAmount(limits.idleTimeout), acceptsConnect: interception == nil)
    }

    /// Set for plain HTTP from the transparent listener (no interception, no proxy form).
    var transparent = false
    var modeLabel: AccessMode {
        transparent || interception?.transparent == true ? .transparent : interception == nil ? .forward : .intercept
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
        releaseParked()
        self.context = nil
        serverLayers = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        sweeper?.unwatch(self)
        releaseParked()
        execute(machine.clientClosed(), context: context)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received(unwrapInboundIn(data), context: context)
    }

    /// A request part from an HTTP/2 stream's adapter, which calls this
    /// directly rather than through the pipeline.
    func streamReceived(_ part: AppRequestPart) {
        guard let context else { return }
        received(part, context: context)
    }

    private func received(_ part: AppRequestPart, context: ChannelHandlerContext) {
        if case .head(let head) = part { responseWriter?.requestArrived(head.method) }
        execute(machine.received(part, now: .now()), context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        execute(machine.clientReadComplete(upstreamWritable: machine.heldUpstream?.isWritable ?? true), context: context)
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        execute(machine.clientWritabilityChanged(writable: context.channel.isWritable), context: context)
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Sent by the listener's quiescing helper when pinproxy shuts down:
        // idle connections close now, busy ones after their current response.
        if event is ChannelShouldQuiesceEvent {
            execute(machine.shutdownRequested(), context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case let parser as HTTPParserError:
            execute(machine.parserFailed(UnreadableRequest.refusal(parser, limits: limits), now: .now()), context: context)
        case let refused as MessageRefusal:
            execute(machine.parserFailed(UnreadableRequest.refusal(refused, limits: limits), now: .now()), context: context)
        case let tls as TLSError:
            // The handshake itself was `ClientHandshakeReporter`'s, before these layers existed.
            clientTLSEndedAfterHandshake(tls)
            context.close(promise: nil)
        default:
            services.logger.debug("client connection error", metadata: ["client": "\(clientAddress)", "error": "\(error)"])
            context.close(promise: nil)
        }
    }

    func checkDeadlines(now: NIODeadline) {
        guard let context else { return }
        execute(machine.deadlinesPassed(now: now, clientWritable: context.channel.isWritable,
                                        upstreamWritable: machine.heldUpstream?.isWritable ?? true), context: context)
    }

    // MARK: UpstreamResponseReceiver

    func upstreamReceived(_ part: UpstreamResponsePart) {
        guard let context else { return }
        switch part {
        case .head(let head): execute(machine.responseHead(head, now: .now()), context: context)
        case .body(let body): execute(machine.responseBody(body, now: .now()), context: context)
        case .end(let trailers): execute(machine.responseEnd(trailers), context: context)
        }
    }

    func upstreamReadComplete() {
        guard let context else { return }
        execute(machine.upstreamReadComplete(clientWritable: context.channel.isWritable), context: context)
    }

    func upstreamWritabilityChanged() {
        guard let context else { return }
        execute(machine.upstreamWritabilityChanged(writable: machine.heldUpstream?.isWritable ?? false), context: context)
    }

    func upstreamClosed(_ error: (any Error)?) {
        guard let context else { return }
        execute(machine.upstreamClosed(error), context: context)
    }

    // MARK: Carrying out actions

    func execute(_ action: Machine.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .route(let head):
            headTimer?.headComplete()
            // Inside a session the CONNECT's identity holds; on the listener each request proves its own.
            guard interception == nil else { return route(head, client: .unchecked, context: context) }
            let address = context.channel.remoteAddress?.addressBytes
            let config = services.store.snapshot.config
            let whole = head.whole
            if services.authenticator.answersAtOnce(whole.headers["proxy-authorization"], address: address, identities: config.identities) {
                return route(.whole(whole), client: ClientStanding.of(whole, address: address, services: services, config: config), context: context)
            }
            // PBKDF2 (~50 ms) runs on the thread pool; the request waits, unread
            // beyond what arrived (the machine queues that behind the head).
            machine.authenticationPending(.whole(whole))
            ClientStanding.resolve(whole, address: address, services: services, config: config, on: context.eventLoop)
                .assumeIsolated().whenComplete { result in
                    guard self.machine.isAuthenticating, self.context != nil else { return }  // closed meanwhile
                    let client = (try? result.get()) ?? .refused(ProxyError(.badRequest, host: nil, detail: "could not check the credential"))
                    self.route(.whole(whole), client: client, context: context)
                    self.takeQueuedParts(context: context)
                }
        case .passOn(let part):
            context.fireChannelRead(wrapInboundOut(part.whole))
        case .acquireUpstream(let route):
            acquire(route, context: context)
        case .fetchToken(let credential, let host, let policy, let upstream):
            fetchToken(credential, host: host, policy: policy, holding: upstream, context: context)
        case .sendRequest(let route, let pending, let upstream, let flush, let readClient):
            upstream.writeHead(&route.upstreamHead)
            for body in pending.bodies { upstream.write(.body(.byteBuffer(body))) }
            if pending.ended { upstream.write(.end(pending.trailers)) }
            if flush { upstream.flush() }
            if readClient { context.read() }
            upstream.read()
        case .forwardBody(let body, let upstream):
            upstream.write(.body(.byteBuffer(body)))
        case .forwardEnd(let trailers, let upstream):
            upstream.write(.end(trailers))
        case .writeInformational(let head):
            writeClient(.head(head), context: context)
        case .writeResponseHead(let head, let throttles):
            if let throttles { noteUpstreamThrottle(retryAfter: throttles.retryAfter, credential: throttles.credential, host: throttles.host) }
            writeResponseHead(head, context: context)
        case .writeResponseBody(let body):
            writeClient(.body(.byteBuffer(body)), context: context)
        case .endResponse(let trailers, let upstream, let reusable, let closeClient, let finished, let next):
            release(upstream, reusable: reusable)
            if closeClient && !(clientProtocol == .h2 && finished != nil) {
                context.writeAndFlush(wrapOutboundOut(.end(trailers))).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
            } else {
                // The keep-alive response, or an HTTP/2 stream's whose request
                // has ended: its END_STREAM closes the stream (NIO closes the
                // stream's channel once both sides have ended). No promise and
                // no callback to allocate, and no close to carry through the
                // stream's pipeline (issue 33).
                writeClient(.end(trailers), flush: true, context: context)
            }
            if let finished {
                logAccess(finished)
                after(next, context: context)
            } else {
                context.read()  // the rest of the request body, to drop
            }
        case .invalidateToken(let credential, let generation):
            services.tokens.provider?.invalidate(session: credential, generation: generation.rawValue)
            services.logger.info("upstream refused the token; refreshing and replaying once", metadata: ["session": "\(credential)"])
        case .releaseAndAcquire(let upstream, let reusable, let route):
            if let upstream { release(upstream, reusable: reusable) }
            acquire(route, context: context)
        case .refuse(let error, let upstream, let reusable, let close, let finished, let next):
            if let upstream { release(upstream, reusable: reusable) }
            // A refusal concerns the exchange routed last (its line may come later, once its body is read).
            services.instrumentation.denied(code: error.code, client: ClientPrincipal.label(finished?.identity ?? machine.lastRoutedIdentity ?? interception?.identity))
            // The access line comes before the writes: a write may complete at
            // once and close the channel, and `clientClosed` then finds the
            // exchange already accounted for (one line, one count).
            if let finished { logAccess(finished) }
            if close, finished?.method == .CONNECT {
                // NIO's encoder drops the body of any response to CONNECT; the
                // refusal's JSON still goes, as bytes below the encoder.
                RefusalBody.writeRaw(error, context: context)
                return
            }
            writeRefusal(error, close: close, context: context)
            if close { return }
            if finished != nil { after(next, context: context) } else { context.read() }
        case .abort(let upstream, let finished):
            if let upstream { release(upstream, reusable: false) }
            services.logger.warning("response cut short", metadata: [
                "host": "\(finished.host)", "client": "\(clientAddress)", "bytes_down": "\(finished.bytesDown)",
                "reason": "\(finished.failure?.text ?? finished.error?.description ?? "-")",
            ])
            services.instrumentation.responseCut(policy: finished.policy, reason: finished.failure?.cutReason ?? .other)
            logAccess(finished)
            context.flush()
            context.close(promise: nil)
        case .splice(let upstream, let exchange):
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
                // Out of the upstream decoder's callback (this is its message's
                // end) before the decoders are taken out.
                context.eventLoop.assumeIsolated().execute {
                    self.splice(upstream, exchange, written: (try? result.get()) != nil, context: context)
                }
            }
        case .abandonSplice(let upstream, let exchange):
            abandonSplice(upstream, exchange, context: context)
        case .finish(let exchange, let next):
            logAccess(exchange)
            after(next, context: context)
        case .clientGone(let upstream, let finished):
            if let upstream { release(upstream, reusable: false) }
            if let finished { logAccess(finished) }
        case .giveBack(let upstream):
            services.pool.release(upstream)
        case .flushUpstream(let upstream, let readClient):
            upstream.flush()
            if readClient { context.read() }
        case .flushClient(let upstream):
            context.flush()
            upstream?.read()
        case .readClient:
            context.read()
        case .readUpstream(let upstream):
            upstream.read()
        case .closeClient:
            context.close(promise: nil)
        }
    }

    /// After an exchange that left the connection open.
    private func after(_ next: Machine.Next, context: ChannelHandlerContext) {
        switch next {
        case .takeNext:
            headTimer?.connectionIsIdle()
            takeQueuedParts(context: context)
        case .close:
            machine.closing()
            context.close(promise: nil)
        case .nothing:
            break
        }
    }

    /// Parts that arrived meanwhile (pipelined, or while a credential was
    /// checked) go first, then the burst ends as a read burst would: flush
    /// upstream, read more.
    private func takeQueuedParts(context: ChannelHandlerContext) {
        while let part = machine.nextQueuedPart() {
            execute(machine.received(part, now: .now()), context: context)
        }
        execute(machine.clientReadComplete(upstreamWritable: machine.heldUpstream?.isWritable ?? true), context: context)
    }

    private func route(_ head: AppRequestHead, client: ClientStanding, context: ChannelHandlerContext) {
        var decision = RequestRouter.route(head, interception: interception, snapshot: services.store.snapshot,
                                           maxHeadBytes: limits.maxHeaderBytes, client: client)
        applyRateLimit(&decision)
        execute(machine.routed(head, decision, now: .now()), context: context)
    }

    // MARK: Writing

    /// A head forwarded as the upstream's bytes goes to an HTTP/1.1
    /// connection's writer as they are, edited on the way
    /// (`ResponseWriter.writeForwarded`), and one forwarded as an HTTP/2
    /// block to an HTTP/2 stream's adapter as that block, edited
    /// (`HTTP2ResponseBlock.forwarded`); an app in the other protocol is
    /// sent the head made whole.
    /// (A switch on the head alone: a tuple of the head and both writers
    /// would copy the head and retain the writers, once a response.)
    private func writeResponseHead(_ head: ClientResponseHead, context: ChannelHandlerContext) {
        switch head {
        case .forwarded(let bytes, let closing):
            if let responseWriter { return MessageRules.writeForwarded(bytes, closing: closing, to: responseWriter) }
        case .block(let block, let closing):
            if let streamAdapter { return streamAdapter.writeForwarded(block.forwarded(closing: closing)) }
        case .head:
            break
        }
        writeClient(.head(head.whole), context: context)
    }

    /// A response part to the app, flushed with `flush`: on an HTTP/2
    /// stream to its adapter directly (no pipeline hop, no cast out of
    /// `NIOAny`), else through the pipeline.
    private func writeClient(_ part: HTTPServerResponsePart, flush: Bool = false, context: ChannelHandlerContext) {
        if let streamAdapter, streamAdapter.send(part, promise: nil) {
            if flush { context.flush() }
        } else if flush {
            context.writeAndFlush(wrapOutboundOut(part), promise: nil)
        } else {
            context.write(wrapOutboundOut(part), promise: nil)
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
}
