import NIOCore
import PinproxyPolicy

/// An accepted client connection, once the ACL let it in: head timer, NIO's
/// HTTP/1.1 server codec, the listener's `HTTPExchangeHandler` (absolute-form
/// requests) and the `ConnectHandler`. An answered CONNECT takes these layers
/// out (`ConnectHandler.listenerLayers`) for an intercepted session's or a
/// tunnel's.
enum ListenerPipeline {
    /// Adds the shape at the end of `channel`'s pipeline; `clientAddress` is
    /// the app's, for the log. Returns the layers (removal order: the
    /// exchange handler, the CONNECT handler, the codec, the timer; the
    /// decoder last).
    @discardableResult
    static func configure(_ channel: any Channel, services: ProxyServices, clientAddress: String,
                          limits: PinproxyConfig.Limits) throws -> PipelineLayers {
        let sync = channel.pipeline.syncOperations
        let timer = RequestHeadTimer(headerTimeout: TimeAmount(limits.headerTimeout), idleTimeout: TimeAmount(limits.idleTimeout),
                                     maxHeadBytes: limits.maxHeaderBytes)
        timer.onTimeout = { reason in
            services.logger.info("client connection closed", metadata: ["client": "\(clientAddress)", "reason": "\(reason)"])
        }
        let exchange = HTTPExchangeHandler(services: services, interception: nil, clientAddress: clientAddress, headTimer: timer, limits: limits)
        let layers = try HTTP1ServerPipeline.configure(sync, timer: timer, exchange: exchange, limits: limits)
        let connect = ConnectHandler(services: services, clientAddress: clientAddress, headTimer: timer, limits: limits)
        try sync.addHandler(connect)
        // After the exchange handler, which a WebSocket splice takes out first.
        layers.insert(connect, after: exchange)
        connect.listenerLayers = layers
        return layers
    }
}
