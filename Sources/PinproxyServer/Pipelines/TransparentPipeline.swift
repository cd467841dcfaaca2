import NIOCore
import PinproxyPolicy

/// The shapes of a connection the transparent listener accepted, before it
/// is known what it carries: `TransparentConnection` alone, holding the first
/// bytes. Once decided, the connection becomes what a CONNECT would have made
/// it (`SessionInstaller`), or, for plain HTTP, the listener's HTTP/1.1 shape
/// with the origin-form target made absolute; then the holder leaves.
enum TransparentPipeline {
    /// Plain HTTP redirected from port 80: `HTTP1ServerPipeline` with
    /// `OriginFormToAbsolute` before the exchange.
    static func configurePlainHTTP(_ sync: ChannelPipeline.SynchronousOperations, timer: RequestHeadTimer,
                                   original: SocketAddress, exchange: HTTPExchangeHandler,
                                   limits: PinproxyConfig.Limits) throws {
        try HTTP1ServerPipeline.configure(sync, timer: timer, exchange: exchange, limits: limits,
                                          beforeExchange: OriginFormToAbsolute(original: original))
    }

    /// The holder leaves once the layers after it have what it held.
    static func removeHolder(_ context: ChannelHandlerContext) {
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
