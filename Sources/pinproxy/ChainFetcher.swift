import NIOCore
import NIOPosix
import PinproxyTLS

/// Handshakes to a live server and returns what it sent, verified or not:
/// `pin --connect` must show the chain even when it would not verify.
enum ChainFetcher {
    struct Result {
        var info: TLSHandshakeInfo
        var address: String
    }

    /// `configuration`: a policy's TLS settings (`explain --connect`); by default a plain client trusting `trust`.
    /// `resolver`: how `host` becomes addresses (`explain --connect` passes the proxy's SSRF guard); nil: NIO's.
    static func fetch(host: String, port: Int, serverName: String, trust: TLSConfiguration.TrustRoots,
                      configuration base: TLSConfiguration? = nil, timeout: TimeAmount = .seconds(10),
                      resolver: (@Sendable (any EventLoop) -> any Resolver & Sendable)? = nil) async throws -> Result {
        var configuration = base ?? TLSConfiguration.client(trustRoots: trust)
        configuration.verification = .reportOnly
        configuration.sessionResumption = false
        let context = try TLSContext(configuration: configuration)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = loop.makePromise(of: TLSHandshakeInfo.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
            .resolver(resolver?(loop))
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(
                        clientContext: context, serverName: serverName, verifyHostname: serverName))
                    try channel.pipeline.syncOperations.addHandler(HandshakeWaiter(promise: handshake))
                }
            }
            .connect(host: host, port: port).get()
        } catch {
            handshake.fail(error)  // never leave a promise behind
            throw error
        }
        let timer = loop.scheduleTask(in: timeout) {
            handshake.fail(TLSError.tlsHandshake("no handshake within \(timeout.nanoseconds / 1_000_000_000) s"))
        }
        defer {
            timer.cancel()
            channel.close(promise: nil)
        }
        let info = try await handshake.futureResult.get()
        return Result(info: info, address: channel.remoteAddress.map(ConnectFailure.address) ?? "\(host):\(port)")
    }

    private final class HandshakeWaiter: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let promise: EventLoopPromise<TLSHandshakeInfo>
        init(promise: EventLoopPromise<TLSHandshakeInfo>) { self.promise = promise }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted(let info) = event as? TLSUserEvent { promise.succeed(info) }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { promise.fail(error) }
        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(TLSError.tlsHandshake("connection closed before the handshake completed"))
        }
    }
}
