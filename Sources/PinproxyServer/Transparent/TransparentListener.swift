import NIOCore
import NIOExtras
import NIOPosix
import PinproxyPolicy

/// `transparent.listen` (docs/transparent-interception.md): connections the
/// kernel redirected. The same client ACL, connection limit, quiescing and
/// registry as the proxy listener; each connection's original destination is
/// read once, at accept, before its first byte.
enum TransparentListener {
    static func bind(_ address: HostPort, services: ProxyServices, group: any EventLoopGroup, quiesce: ServerQuiescingHelper,
                     registry: ConnectionRegistry, acceptHealth: AcceptHealth) async throws -> any Channel {
        let limits = services.store.snapshot.config.limits
        return try await ServerChannelPipeline.bootstrap(group: group, limits: limits, services: services,
                                                         quiesce: quiesce, acceptHealth: acceptHealth)
            .childChannelInitializer { channel in
                OriginalDestination.of(channel).flatMapThrowing { original in
                    registry.add(channel)
                    services.instrumentation.clientConnections(delta: 1)
                    channel.closeFuture.whenComplete { _ in services.instrumentation.clientConnections(delta: -1) }
                    try channel.pipeline.syncOperations.addHandler(TransparentConnection(
                        services: services, client: channel.remoteAddress, original: original, listener: channel.localAddress))
                }
            }
            .bind(host: address.host, port: address.port).get()
    }
}
