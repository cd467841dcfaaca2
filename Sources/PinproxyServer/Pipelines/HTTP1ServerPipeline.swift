import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// An HTTP/1.1 server shape, the listener's and an intercepted session's:
/// head timer, NIO's server codec, and the exchange handler on top.
enum HTTP1ServerPipeline {
    /// Adds the shape at the end of `sync` and tells `exchange` its layers
    /// (a WebSocket splice takes them out again). Returns them.
    /// `timerInPlace`: `timer` is already the pipeline's last handler (an
    /// intercepted session's, there from its CONNECT on).
    @discardableResult
    static func configure(_ sync: ChannelPipeline.SynchronousOperations, timer: RequestHeadTimer, timerInPlace: Bool = false,
                          exchange: HTTPExchangeHandler, limits: PinproxyConfig.Limits,
                          beforeExchange: (any RemovableChannelHandler)? = nil) throws -> PipelineLayers {
        if !timerInPlace { try sync.addHandler(timer) }
        // An upgrade configuration with no upgraders: the only public way to keep
        // the bytes a client sends right after its CONNECT head, or after a
        // WebSocket upgrade request, for the layers or the splice that follow.
        try sync.configureHTTPServerPipeline(
            position: .last, withPipeliningAssistance: false,
            withServerUpgrade: (upgraders: [], completionHandler: { _ in }),
            withErrorHandling: false, withOutboundHeaderValidation: true, withEncoderConfiguration: .init(),
            withDecoderLimitConfiguration: ProxyServices.decoderLimits(limits))
        // NIO's helper names none of what it adds (and ties its decoder to its
        // encoder, so they are not built here by hand): they are read back once,
        // just after, from the end of this pipeline, and kept as instances.
        let decoder = try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        var handlers: [any RemovableChannelHandler] = [exchange]
        handlers.append(try sync.handler(type: NIOHTTPResponseHeadersValidator.self))
        handlers.append(try sync.handler(type: HTTPResponseEncoder.self))
        handlers.append(try sync.handler(type: HTTPServerUpgradeHandler.self))
        handlers.append(timer)
        if let beforeExchange {
            try sync.addHandler(beforeExchange)
            handlers.insert(beforeExchange, at: 1)
        }
        try sync.addHandler(exchange)
        let layers = PipelineLayers(handlers: handlers, decoders: [decoder])
        exchange.serverLayers = layers
        return layers
    }
}
