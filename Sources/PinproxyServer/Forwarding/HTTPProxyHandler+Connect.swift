import Logging
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// CONNECT: refused, spliced blindly (`tunnel`), or intercepted — the app's
/// TLS is terminated with a leaf minted for the CONNECT host and the handler
/// stack is rebuilt for the requests inside.
extension HTTPProxyHandler {
    func beginConnect(_ head: HTTPRequestHead, exchange: Exchange, context: ChannelHandlerContext) throws {
        exchange.mode = "connect"
        guard let authority = Authority(head.uri) else {
            throw ProxyError(.badRequest, host: nil, detail: "CONNECT target \"\(head.uri)\" is not host:port")
        }
        let host = try Authority.routingHost(authority.host)
        let port = authority.port ?? 443
        exchange.host = host
        let snapshot = services.store.snapshot
        let policy = snapshot.policy(forHost: host)
        exchange.policy = policy
        try checkAllowed(host: host, policy: policy, snapshot: snapshot)
        if let policy, policy.spec.action == .intercept {
            exchange.connect = ConnectDecision(host: host, port: port, action: .intercept(policy))
        } else {
            exchange.connect = ConnectDecision(host: host, port: port, action: .tunnel)
            exchange.plan = plan(host: host, port: port, tls: false, policy: policy)
        }
    }

    /// The CONNECT head is complete: answer it and change layers.
    func carryOut(_ decision: ConnectDecision, exchange: Exchange, context: ChannelHandlerContext) {
        switch decision.action {
        case .intercept(let policy):
            exchange.mode = "intercept"
            establish(exchange, context: context) {
                try self.installInterception(decision, policy: policy, context: context)
            }
        case .tunnel:
            exchange.mode = "tunnel"
            guard let plan = exchange.plan else { preconditionFailure("tunnel without a dial plan") }
            // The SSRF guard runs here, before the 200: a refused tunnel gets its 403.
            services.connector.dial(plan, on: context.eventLoop) { _ in }.assumeIsolated().whenComplete { result in
                guard self.isCurrent(exchange) else {
                    // The app left during the dial: its line was written then (499).
                    if case .success(let upstream) = result { upstream.close(promise: nil) }
                    return
                }
                switch result {
                case .failure(let error):
                    self.refuse(exchange, UpstreamConnector.refusal(for: error, host: decision.host), context: context)
                case .success(let upstream):
                    exchange.upstreamAddress = upstream.remoteAddress?.hostPort
                    self.establish(exchange, context: context) {
                        try self.installTunnel(to: upstream, exchange: exchange, context: context)
                    }
                }
            }
        }
    }

    /// "200 Connection established", then the new layers once it is written.
    private func establish(_ exchange: Exchange, context: ChannelHandlerContext, install: @escaping () throws -> Void) {
        exchange.status = 200
        exchange.responseStarted = true
        var headers = HTTPHeaders()
        headers.add(name: "Via", value: Via.value)
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: 200, reasonPhrase: "Connection established"), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
            guard case .success = result, context.channel.isActive else {
                self.markClosed()
                return
            }
            self.enterUpgrading()
            do {
                try install()
            } catch {
                self.services.logger.error("could not set up the CONNECT session", metadata: ["host": "\(exchange.host)", "error": "\(error)"])
                context.close(promise: nil)
            }
        }
    }

    private func installInterception(_ decision: ConnectDecision, policy: HostPolicy, context: ChannelHandlerContext) throws {
        let sync = context.pipeline.syncOperations
        let services = self.services
        let host = decision.host
        let client = clientAddress
        let timer = headTimer.makeSibling()
        let inner = HTTPProxyHandler(
            services: services, mode: .intercepted(Interception(host: host, port: decision.port, policy: policy)),
            clientAddress: clientAddress, headTimer: timer, limits: limits)
        // The CONNECT host names the leaf; a different SNI is only logged.
        let innerOnLoop = NIOLoopBound(inner, eventLoop: context.eventLoop)
        let selector: TLSCertificateSelector = { serverName, loop in
            innerOnLoop.value.clientSNI = serverName  // for the log, should the app then refuse the certificate
            if let serverName, !Authority(host: serverName, port: nil).sameHost(as: host) {
                services.logger.notice("client SNI differs from the CONNECT host", metadata: [
                    "client": "\(client)", "connect_host": "\(host)", "sni": "\(serverName)",
                ])
            }
            return loop.makeCompletedFuture {
                let (leaf, minted) = try services.ca.leafReportingMint(for: host)
                if minted { services.instrumentation.mintedCertificate() }
                return leaf
            }
        }
        try sync.addHandler(TLSHandler(serverContext: services.interceptionContext, certificateSelector: selector), position: .last)
        try sync.addHandler(timer, position: .last)
        try sync.configureHTTPServerPipeline(
            position: .last, withPipeliningAssistance: false, withServerUpgrade: nil, withErrorHandling: false,
            withOutboundHeaderValidation: true, withEncoderConfiguration: .init(),
            withDecoderLimitConfiguration: ProxyServices.decoderLimits(limits))
        try sync.addHandler(inner, position: .last)
        try removeFrontLayers(context: context)
    }

    private func installTunnel(to upstream: any Channel, exchange: Exchange, context: ChannelHandlerContext) throws {
        precondition(upstream.eventLoop === context.eventLoop, "a tunnel's two channels must share an event loop")
        let (clientSide, upstreamSide) = GlueHandler.matchedPair()
        let services = self.services
        let client = clientAddress
        try context.pipeline.syncOperations.addHandler(clientSide, position: .last)
        try upstream.pipeline.syncOperations.addHandler(upstreamSide)
        try removeFrontLayers(context: context)
        clientSide.onClose = {
            AccessRecord(
                client: client, method: "CONNECT", host: exchange.host, path: exchange.request.uri, status: 200,
                bytesUp: clientSide.bytesRelayed, bytesDown: upstreamSide.bytesRelayed, seconds: exchange.elapsedSeconds,
                policy: exchange.policyLabel, pin: nil, upstream: exchange.upstreamAddress, error: nil, mode: "tunnel"
            ).log(to: services.accessLog)
            services.instrumentation.requestCompleted(policy: exchange.policy, status: 200, seconds: exchange.elapsedSeconds)
            services.instrumentation.bytes(policy: exchange.policy, up: clientSide.bytesRelayed, down: upstreamSide.bytesRelayed)
        }
        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
        upstream.setOption(.autoRead, value: true).whenFailure { _ in }
    }

    /// Takes out the listener's HTTP layers and this handler. The decoder hands
    /// any bytes it held past the CONNECT head to the new layers.
    private func removeFrontLayers(context: ChannelHandlerContext) throws {
        let sync = context.pipeline.syncOperations
        if let upgrade = try? sync.handler(type: HTTPServerUpgradeHandler.self) { _ = sync.removeHandler(upgrade) }
        if let validator = try? sync.handler(type: NIOHTTPResponseHeadersValidator.self) { _ = sync.removeHandler(validator) }
        _ = sync.removeHandler(try sync.handler(type: HTTPResponseEncoder.self))
        _ = sync.removeHandler(try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self))
        _ = sync.removeHandler(headTimer)
        _ = sync.removeHandler(context: context)
    }
}
