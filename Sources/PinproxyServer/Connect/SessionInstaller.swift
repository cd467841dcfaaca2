import Logging
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// What a CONNECT becomes once answered, built by one function each: the
/// listener's HTTP layers come out (exactly the instances `ListenerPipeline`
/// added), the session's go in (`InterceptedPipeline`, `SplicePipeline`).
enum SessionInstaller {
    /// Interception: the app's TLS is terminated with a leaf minted for the
    /// CONNECT host, and the requests inside go to an `HTTPExchangeHandler`
    /// bound to that host and policy.
    static func intercept(context: ChannelHandlerContext, host: String, port: Int, policy: HostPolicy, services: ProxyServices,
                          clientAddress: String, headTimer: RequestHeadTimer, listenerLayers: PipelineLayers,
                          limits: PinproxyConfig.Limits, identity: String? = nil, transparent: Bool = false) throws {
        let timer = headTimer.makeSibling()
        // One binding for the session, whichever HTTP version the app picks:
        // the CONNECT's identity holds for every request and every h2 stream.
        let interception = RequestRouter.Interception(host: host, port: port, policy: policy, identity: identity, transparent: transparent)
        // The room the session's upstream streams kept goes back with it.
        context.channel.closeFuture.whenComplete { [room = interception.streamRoom, pool = services.pool] _ in
            room.giveBack(to: pool)
        }
        let reporter = ClientHandshakeReporter(services: services, clientAddress: clientAddress, connectHost: host)
        let reporterOnLoop = NIOLoopBound(reporter, eventLoop: context.eventLoop)
        // The CONNECT host names the leaf; a different SNI is only logged. The
        // leaf is at hand (the CA's cache, or minted here on the loop as
        // before), so it is served inside the handshake's certificate callback.
        let selector: TLSCertificateSelector = { serverName, _ in
            reporterOnLoop.value.clientSNI = serverName  // for the log, should the app then refuse the certificate
            if let serverName, !Authority(host: serverName, port: nil).sameHost(as: host) {
                services.logger.notice("client SNI differs from the CONNECT host", metadata: [
                    "client": "\(clientAddress)", "connect_host": "\(host)", "sni": "\(serverName)",
                ])
            }
            return TLSCertificateChoice(catching: {
                let (leaf, minted) = try services.ca.leafReportingMint(for: host)
                if minted { services.instrumentation.mintedCertificate() }
                return leaf
            })
        }
        let http2 = services.store.snapshot.config.http2
        let tls = try TLSHandler(serverContext: http2 ? services.interceptionContext : services.interceptionContextHTTP1,
                                 certificateSelector: selector)
        let session = InterceptedPipeline.Session(
            limits: limits, logger: services.logger, timer: timer,
            makeHTTP1Exchange: {
                HTTPExchangeHandler(services: services, interception: interception, clientAddress: clientAddress,
                                    headTimer: timer, limits: limits)
            },
            makeStreamExchange: {
                HTTPExchangeHandler(services: services, interception: interception, clientAddress: clientAddress,
                                    headTimer: nil, limits: limits, clientProtocol: .h2)
            })
        try InterceptedPipeline.configure(context.channel, tls: tls, reporter: reporter, session: session)
        listenerLayers.remove(from: context.pipeline.syncOperations)
    }

    /// A blind splice to `upstream`; `onClose` gets the bytes each way. No
    /// byte either way for `limits.idle_timeout` closes both sides, as for a
    /// WebSocket splice (docs/contract.md §10): a tunnel never holds its two
    /// descriptors for ever. The close is logged and counted.
    static func tunnel(context: ChannelHandlerContext, to upstream: any Channel, services: ProxyServices,
                       host: String, policy: HostPolicy?, clientAddress: String, listenerLayers: PipelineLayers,
                       onClose: @escaping (_ up: Int, _ down: Int) -> Void) throws {
        precondition(upstream.eventLoop === context.eventLoop, "a tunnel's two channels must share an event loop")
        let idleTimeout = TimeAmount(services.store.snapshot.config.limits.idleTimeout)
        let (clientSide, upstreamSide) = try SplicePipeline.addGlue(
            client: context.pipeline.syncOperations, upstream: upstream.pipeline.syncOperations, upstreamPosition: .last,
            idleTimeout: idleTimeout, onIdle: {
                services.logger.info("tunnel idle; closed", metadata: [
                    "host": "\(host)", "client": "\(clientAddress)", "reason": "limits.idle_timeout"])
                services.instrumentation.idleClosed(policy: policy, kind: .tunnel)
            })
        // The listener's decoder leaves last, handing any bytes it held past
        // the CONNECT head to the glue.
        listenerLayers.remove(from: context.pipeline.syncOperations)
        clientSide.onClose = { onClose(clientSide.bytesRelayed, upstreamSide.bytesRelayed) }
        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
        upstream.setOption(.autoRead, value: true).whenFailure { _ in }
    }
}
