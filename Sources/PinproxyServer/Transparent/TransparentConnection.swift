import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// One connection on the transparent listener: its first bytes are read
/// without being consumed (`ClientHelloPeek`), then it is treated exactly as
/// a CONNECT to `SNI:original-port` (or `address:original-port` without SNI)
/// would be — the same `ConnectDecision`, the same interception and tunnel
/// installers — with two differences: there is no "200 Connection
/// established" to write, and a refusal is a TLS alert. Plain HTTP goes to
/// the forward path, by its Host.
final class TransparentConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        /// Reading the first bytes; nothing decided.
        case peeking
        /// Decided on a tunnel; its upstream is being dialled.
        case dialling(Attempt)
        /// The next layers are in place; this handler is leaving.
        case handedOver
        /// Refused, or the app left (its line written).
        case done
    }

    /// What the access line of a tunnel or refusal says.
    struct Attempt {
        var host: String
        var port: Int
        var policy: HostPolicy?
        var upstreamAddress: String?
    }

    let services: ProxyServices
    let clientAddress: String
    let client: SocketAddress?
    /// Where the app meant to go; nil when the kernel redirected nothing.
    let original: SocketAddress?
    /// This listener's own address (a connection to it, unredirected, is a loop).
    let listener: SocketAddress?
    private let started = NIODeadline.now()
    private var state: State = .peeking
    private var buffered: ByteBuffer?
    private var timeout: Scheduled<Void>?

    init(services: ProxyServices, client: SocketAddress?, original: SocketAddress?, listener: SocketAddress?) {
        self.services = services
        self.client = client
        self.clientAddress = client?.hostPort ?? "?"
        self.original = original
        self.listener = listener
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The same bound as a request head: an app that sends nothing is cut off.
        let limit = TimeAmount(services.store.snapshot.config.limits.headerTimeout)
        timeout = context.eventLoop.assumeIsolated().scheduleTask(in: limit) {
            guard case .peeking = self.state else { return }
            self.refuse(Attempt(host: "", port: self.original?.port ?? 0),
                        ProxyError(.badRequest, host: nil, detail: "no ClientHello or request head within limits.header_timeout"),
                        context: context)
        }
        if context.channel.isActive { context.read() }
    }

    /// Added in the child initializer, before activation: reading starts here
    /// (the listener's children do not read on their own).
    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .peeking = state else { return }
        var bytes = unwrapInboundIn(data)
        if buffered == nil { buffered = bytes } else { buffered!.writeBuffer(&bytes) }
        let seen = buffered!.readableBytesView
        switch ClientHelloPeek.read(Array(seen)) {
        case .needMore:
            if seen.count > ClientHelloPeek.maxHelloBytes + 64 {
                refuse(Attempt(host: "", port: original?.port ?? 0),
                       ProxyError(.badRequest, host: nil, detail: "a ClientHello larger than \(ClientHelloPeek.maxHelloBytes) bytes"), context: context)
            } else {
                context.read()
            }
        case .tls(let serverName):
            decideTLS(serverName: serverName, context: context)
        case .notTLS:
            plainHTTP(context: context)
        case .malformed(let why):
            refuse(Attempt(host: "", port: original?.port ?? 0), ProxyError(.badRequest, host: nil, detail: "not a TLS ClientHello: \(why)"),
                   context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .dialling(let attempt) = state {
            // The app left before its tunnel was up: one line, status 499.
            state = .done
            logAccess(attempt, status: 499, error: nil)
        }
        context.fireChannelInactive()
    }

    // MARK: Deciding

    private func decideTLS(serverName: String?, context: ChannelHandlerContext) {
        var attempt = Attempt(host: "", port: original?.port ?? 0)
        let snapshot = services.store.snapshot
        do {
            let original = try TransparentLoop.check(original: original, client: client, listener: listener)
            attempt.port = original.port ?? 443
            // No SNI: the address the app dialled is the host policies match (IP literals).
            attempt.host = try Authority.routingHost(serverName ?? original.ipAddress ?? "")
            if let why = ClientNetworkACL.refusal(address: client?.addressBytes, config: snapshot.config) {
                throw ProxyError(.clientDenied, host: attempt.host, detail: why)
            }
            // No Proxy-Authorization can ride on a redirected connection: the
            // source address is all that identifies the client.
            let standing = ClientStanding.principal(ClientPrincipal(address: client?.addressBytes, identity: nil))
            let decision = ConnectDecision(host: attempt.host, port: attempt.port, client: standing, snapshot: snapshot)
            attempt.policy = decision.policy
            if let refusal = decision.refusal { throw refusal }
            if decision.intercept, let policy = decision.policy {
                try SessionInstaller.intercept(
                    context: context, host: attempt.host, port: attempt.port, policy: policy, services: services,
                    clientAddress: clientAddress, headTimer: makeHeadTimer(snapshot.config.limits), listenerLayers: .none,
                    limits: snapshot.config.limits, identity: nil, transparent: true)
                handOver(context: context)
            } else {
                dialTunnel(attempt, context: context)
            }
        } catch let refusal as ProxyError {
            refuse(attempt, refusal, context: context)
        } catch {
            refuse(attempt, ProxyError(.badRequest, host: attempt.host, detail: "\(error)"), context: context)
        }
    }

    /// As a CONNECT tunnel: the SSRF guard runs in the dial (the policy's
    /// upstream, or the name resolved), never the original address blindly.
    private func dialTunnel(_ attempt: Attempt, context: ChannelHandlerContext) {
        state = .dialling(attempt)
        let plan = DialPlan(host: attempt.host, port: attempt.port, tls: false, policy: attempt.policy)
        services.connector.dial(plan, on: context.eventLoop) { _ in }.assumeIsolated().whenComplete { result in
            guard case .dialling(var attempt) = self.state else {
                if case .success(let upstream) = result { upstream.close(promise: nil) }  // the app left (logged then)
                return
            }
            switch result {
            case .failure(let error):
                self.refuse(attempt, UpstreamConnector.refusal(for: error, host: attempt.host), context: context)
            case .success(let upstream):
                attempt.upstreamAddress = upstream.remoteAddress?.hostPort
                do {
                    try SessionInstaller.tunnel(context: context, to: upstream, services: self.services, host: attempt.host,
                                                policy: attempt.policy, clientAddress: self.clientAddress, listenerLayers: .none) { up, down in
                        self.logAccess(attempt, status: 200, error: nil, bytesUp: up, bytesDown: down)
                    }
                    self.handOver(context: context)
                } catch {
                    upstream.close(promise: nil)
                    self.refuse(attempt, ProxyError(.connectFailed, host: attempt.host, detail: "could not set up the tunnel: \(error)"),
                                context: context)
                }
            }
        }
    }

    /// Plain HTTP: the listener's HTTP layers, with the origin-form target
    /// made absolute, so the forward path routes it by Host.
    private func plainHTTP(context: ChannelHandlerContext) {
        let attempt = Attempt(host: "", port: original?.port ?? 80)
        do {
            let original = try TransparentLoop.check(original: original, client: client, listener: listener)
            let snapshot = services.store.snapshot
            if let why = ClientNetworkACL.refusal(address: client?.addressBytes, config: snapshot.config) {
                throw ProxyError(.clientDenied, host: nil, detail: why)
            }
            let limits = snapshot.config.limits
            let timer = makeHeadTimer(limits)
            let exchange = HTTPExchangeHandler(services: services, interception: nil, clientAddress: clientAddress, headTimer: timer, limits: limits)
            exchange.transparent = true
            try TransparentPipeline.configurePlainHTTP(context.pipeline.syncOperations, timer: timer, original: original,
                                                       exchange: exchange, limits: limits)
            handOver(context: context)
        } catch let refusal as ProxyError {
            // No HTTP layer yet: the refusal goes out as bytes, as the ACL's does.
            state = .done
            services.instrumentation.denied(code: refusal.code, client: ClientPrincipal.label(nil))
            logAccess(attempt, status: Int(refusal.status.code), error: refusal, method: "-")
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: RefusalBody.raw(refusal)))).assumeIsolated().whenComplete { _ in
                LingeringClose.close(context.channel)
            }
        } catch {
            services.logger.error("could not set up a transparent HTTP connection", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    // MARK: Handing over, refusing

    /// The bytes read so far go to the layers now after this handler, which leaves.
    private func handOver(context: ChannelHandlerContext) {
        state = .handedOver
        timeout?.cancel()
        if let bytes = buffered {
            buffered = nil
            context.fireChannelRead(wrapInboundOut(bytes))
            // A splice flushes what it relayed at read-complete: without it the
            // held ClientHello sat unsent in the tunnel's upstream channel.
            context.fireChannelReadComplete()
        }
        TransparentPipeline.removeHolder(context)
    }

    /// A TLS alert (no HTTP can be spoken to a TLS client), one access line, counted.
    private func refuse(_ attempt: Attempt, _ error: ProxyError, context: ChannelHandlerContext) {
        state = .done
        timeout?.cancel()
        services.instrumentation.denied(code: error.code, client: ClientPrincipal.label(nil))
        logAccess(attempt, status: Int(error.status.code), error: error)
        context.writeAndFlush(wrapOutboundOut(TLSAlert.record(TLSAlert.description(for: error.code)))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func makeHeadTimer(_ limits: PinproxyConfig.Limits) -> RequestHeadTimer {
        RequestHeadTimer(headerTimeout: TimeAmount(limits.headerTimeout), idleTimeout: TimeAmount(limits.idleTimeout),
                         maxHeadBytes: limits.maxHeaderBytes)
    }

    private func logAccess(_ attempt: Attempt, status: Int, error: ProxyError?, method: String = "TLS",
                           bytesUp: Int = 0, bytesDown: Int = 0) {
        let seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        let host = attempt.host.isEmpty ? (error?.host ?? original?.ipAddress ?? "-") : attempt.host
        services.recordAccess(AccessRecord(
            client: clientAddress, method: method, host: host, path: "\(host):\(attempt.port)", status: status,
            bytesUp: bytesUp, bytesDown: bytesDown, seconds: seconds, policy: attempt.policy?.metricLabel ?? "_none", pin: nil,
            upstream: attempt.upstreamAddress, error: error?.code.rawValue, mode: .transparent, identity: nil,
            detail: error.map { $0.withheldDetail ?? $0.detail }
        ), policy: attempt.policy)
    }
}
