import Logging
import NIOCore
import NIOHTTP2

/// The end of an h2 app connection's handlers, after `NIOHTTP2Handler` and the
/// connection manager: the connection-level frames they pass on (SETTINGS,
/// PING, GOAWAY) stop here, and every error on the connection ends it.
///
/// It has to sit after `NIOHTTP2Handler`: on a connection error that handler
/// writes GOAWAY and fires the error towards the tail, then goes on reading,
/// answering every further read with another GOAWAY and keeping the bytes it
/// can no longer parse (a flood of them grew the process by 100 MB). Closing
/// here stops that: the TLS layer drops whatever arrives once it is closing.
/// A stream error (RST_STREAM written for it) comes the same way and
/// ends the connection too (RFC 9113 §5.4 lets an endpoint treat it as a
/// connection error): NIOHTTP2Handler reports both alike, and an app that
/// sends HTTP/2 a stream cannot take is not one to keep reading from.
/// TLS and transport errors pass through the HTTP/2 handlers to here as well.
/// Shutdown needs nothing here: the listener's `ChannelShouldQuiesceEvent`
/// reaches the connection manager on its way, which answers with GOAWAY.
final class HTTP2ConnectionEnd: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    /// The activation `InterceptedHTTP2Pipeline` replays for the connection manager
    /// ends here: the handlers after this one saw the channel's own.
    func channelActive(context: ChannelHandlerContext) {}

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The error's type only: NIOHTTP2's errors quote header values, an app's secrets among them.
        logger.debug("HTTP/2 client connection error", metadata: ["error": "\(type(of: error))"])
        context.close(promise: nil)
    }
}
