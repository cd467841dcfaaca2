import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO
import PinproxyPolicy

/// An HTTP/1.1 server shape, the listener's and an intercepted session's:
/// head timer, the head path's request decoder and response writer, and
/// the exchange handler on top.
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
        // The head path's request decoder in NIO's decoder's place, with its
        // limits: the same parts, refusing all NIO refuses and some more
        // (docs/contract.md §10), cheaper once specialized (issue 33). It
        // keeps the bytes a client sends right after its CONNECT head, or
        // after a WebSocket upgrade request, for the layers or the splice
        // that follow, as NIO's `.forwardBytes` does. Above it the head
        // path's `ResponseWriter` in place of NIO's response encoder and
        // outbound validator: the same bytes and refusals for NIO's parts, and
        // an upstream's head forwarded as its own bytes, which NIO's encoder
        // cannot take (bench/README.md).
        let decoder = ByteToMessageHandler(AppRequestHeadPathDecoder(decoder: HeadPathDecoder(
            maxFieldBytes: limits.maxHeaderBytes, maxFieldCount: MessageRules.maxHeaderCount)))
        let writer = ResponseWriter()
        try sync.addHandlers([decoder, writer])
        var handlers: [any RemovableChannelHandler] = [exchange, writer, timer]
        if let beforeExchange {
            try sync.addHandler(beforeExchange)
            handlers.insert(beforeExchange, at: 1)
        }
        try sync.addHandler(exchange)
        let layers = PipelineLayers(handlers: handlers, decoders: [decoder])
        exchange.serverLayers = layers
        exchange.responseWriter = writer
        return layers
    }
}
