import NIOCore
import NIOExtras
import NIOPosix
import PinproxyPolicy

/// A listening socket's own pipeline, the proxy listener's and the
/// transparent one's alike: quiescing (shutdown closes it and drains its
/// connections), the connection limit, accept-error health, and accept
/// backoff. Accepted connections start with reads off (`ListenerPipeline` or
/// `TransparentConnection` turns them on) and without Nagle.
enum ServerChannelPipeline {
    static func bootstrap(group: any EventLoopGroup, limits: PinproxyConfig.Limits, services: ProxyServices,
                          quiesce: ServerQuiescingHelper, acceptHealth: AcceptHealth) -> ServerBootstrap {
        ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        quiesce.makeServerChannelHandler(channel: channel),
                        AcceptLimiter(limit: limits.maxClientConnections),
                        AcceptErrorMonitor(health: acceptHealth, logger: services.logger),
                        AcceptBackoffHandler(shouldForwardIOErrorCaught: false),
                    ])
                }
            }
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    }
}
