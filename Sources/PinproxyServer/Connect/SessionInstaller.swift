import Logging
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// What a CONNECT becomes once answered, built by one function each: the
/// listener's HTTP layers come out, the session's go in.
enum SessionInstaller {
    /// Interception: the app's TLS is terminated with a leaf minted for the
    /// CONNECT host, and the requests inside go to an `HTTPExchangeHandler`
    /// bound to that host and policy.
    static func intercept(context: ChannelHandlerContext, host: String, port: Int, policy: HostPolicy, services: ProxyServices,
                          clientAddress: String, headTimer: RequestHeadTimer, limits: PinproxyConfig.Limits,
                          identity: String? = nil, transparent: Bool = false) throws {
        let sync = context.pipeline.syncOperations
        let timer = headTimer.makeSibling()
        // One binding for the session, whichever HTTP version the app picks:
        // the CONNECT's identity holds for every request and every h2 stream.
        let interception = RequestRouter.Interception(host: host, port: port, policy: policy, identity: identity, transparent: transparent)
        let inner = HTTPExchangeHandler(
            services: services, interception: interception,
            clientAddress: clientAddress, headTimer: timer, limits: limits)
        let innerOnLoop = NIOLoopBound(inner, eventLoop: context.eventLoop)
        // The CONNECT host names the leaf; a different SNI is only logged.
        let selector: TLSCertificateSelector = { serverName, loop in
            innerOnLoop.value.clientSNI = serverName  // for the log, should the app then refuse the certificate
            if let serverName, !Authority(host: serverName, port: nil).sameHost(as: host) {
                services.logger.notice("client SNI differs from the CONNECT host", metadata: [
                    "client": "\(clientAddress)", "connect_host": "\(host)", "sni": "\(serverName)",
                ])
            }
            return loop.makeCompletedFuture {
                let (leaf, minted) = try services.ca.leafReportingMint(for: host)
                if minted { services.instrumentation.mintedCertificate() }
                return leaf
            }
        }
        let http2 = services.store.snapshot.config.http2
        let tls = try TLSHandler(serverContext: http2 ? services.interceptionContext : services.interceptionContextHTTP1,
                             certificateSelector: selector)
        try sync.addHandler(tls, position: .last)
        // HTTP/1.1 layers go in now (an app may offer no ALPN); an `h2`
        // handshake swaps them for HTTP/2's, one exchange handler per stream.
        let protocolSwitch = ClientProtocolSwitch(limits: limits, logger: services.logger) {
            HTTPExchangeHandler(services: services, interception: interception, clientAddress: clientAddress,
                                headTimer: timer.makeSibling(), limits: limits, clientProtocol: .h2)
        }
        try sync.addHandler(protocolSwitch, position: .last)
        try sync.addHandler(timer, position: .last)
        // An upgrade configuration with no upgraders keeps the bytes an app sends
        // after a WebSocket upgrade request for the splice (as on the listener).
        try sync.configureHTTPServerPipeline(
            position: .last, withPipeliningAssistance: false, withServerUpgrade: (upgraders: [], completionHandler: { _ in }), withErrorHandling: false,
            withOutboundHeaderValidation: true, withEncoderConfiguration: .init(),
            withDecoderLimitConfiguration: ProxyServices.decoderLimits(limits))
        try sync.addHandler(inner, position: .last)
        // A transparent connection never had the listener's HTTP layers.
        if !transparent { try removeListenerLayers(context: context, headTimer: headTimer) }
    }

    /// A blind splice to `upstream`; `onClose` gets the bytes each way. No
    /// byte either way for `limits.idle_timeout` closes both sides, as for a
    /// WebSocket splice (docs/contract.md §10): a tunnel never holds its two
    /// descriptors for ever. The close is logged and counted.
    static func tunnel(context: ChannelHandlerContext, to upstream: any Channel, services: ProxyServices,
                       host: String, policy: HostPolicy?, clientAddress: String, transparent: Bool = false,
                       onClose: @escaping (_ up: Int, _ down: Int) -> Void) throws {
        precondition(upstream.eventLoop === context.eventLoop, "a tunnel's two channels must share an event loop")
        let (clientSide, upstreamSide) = GlueHandler.matchedPair()
        // The idle timer sees both directions on the app's side: what the app
        // sends is read there, what the upstream sends is written there.
        let idleTimeout = TimeAmount(services.store.snapshot.config.limits.idleTimeout)
        if idleTimeout > .zero {
            try context.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idleTimeout), position: .last)
            try context.pipeline.syncOperations.addHandler(SpliceIdleClose(onIdle: {
                services.logger.info("tunnel idle; closed", metadata: [
                    "host": "\(host)", "client": "\(clientAddress)", "reason": "limits.idle_timeout"])
                services.instrumentation.idleClosed(policy: policy, kind: .tunnel)
            }), position: .last)
        }
        try context.pipeline.syncOperations.addHandler(clientSide, position: .last)
        try upstream.pipeline.syncOperations.addHandler(upstreamSide)
        if !transparent {
            let headTimer = try context.pipeline.syncOperations.handler(type: RequestHeadTimer.self)
            try removeListenerLayers(context: context, headTimer: headTimer)
        }
        clientSide.onClose = { onClose(clientSide.bytesRelayed, upstreamSide.bytesRelayed) }
        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
        upstream.setOption(.autoRead, value: true).whenFailure { _ in }
    }

    /// Takes out the listener's HTTP layers, its exchange handler and the
    /// CONNECT handler. The handlers that take HTTP parts go first: the
    /// decoder, removed after them, hands any bytes it held past the CONNECT
    /// head (a TLS hello sent at once) to the new layers.
    private static func removeListenerLayers(context: ChannelHandlerContext, headTimer: RequestHeadTimer) throws {
        let sync = context.pipeline.syncOperations
        let exchanges = try sync.handler(type: HTTPExchangeHandler.self)
        _ = sync.removeHandler(exchanges)
        _ = sync.removeHandler(context: context)
        if let validator = try? sync.handler(type: NIOHTTPResponseHeadersValidator.self) { _ = sync.removeHandler(validator) }
        _ = sync.removeHandler(try sync.handler(type: HTTPResponseEncoder.self))
        _ = sync.removeHandler(try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self))
        _ = sync.removeHandler(headTimer)
    }
}
