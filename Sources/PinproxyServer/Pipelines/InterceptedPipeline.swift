import Logging
import NIOCore
import NIOTLS
import PinproxyPolicy
import PinproxyTLS

/// An intercepted session after its CONNECT: the app's TLS terminated by
/// `tls`, the `ClientHandshakeReporter`, the session's head timer (its idle
/// deadline also bounds a handshake that stalls), and NIO's ALPN handler,
/// which holds any byte back until the handshake has settled the protocol
/// and then puts in the HTTP layers for it, once: HTTP/1.1
/// (`HTTP1ServerPipeline`, also for an app that offered no ALPN) or HTTP/2
/// (`InterceptedHTTP2Pipeline`, without the head timer: the connection
/// manager bounds an h2 connection's idleness). No HTTP layer is put in only
/// to be swapped out.
enum InterceptedPipeline {
    /// What the session's HTTP layers are built from, once ALPN has settled.
    struct Session {
        var limits: PinproxyConfig.Limits
        var logger: Logger
        /// The head timer, from the CONNECT on; an HTTP/1.1 session keeps it.
        var timer: RequestHeadTimer
        /// The HTTP/1.1 exchange handler (its head timer is `timer`).
        var makeHTTP1Exchange: () -> HTTPExchangeHandler
        /// One h2 stream's exchange handler.
        var makeStreamExchange: () -> HTTPExchangeHandler
    }

    /// Adds the shape at the end of `channel`'s pipeline.
    static func configure(_ channel: any Channel, tls: TLSHandler, reporter: ClientHandshakeReporter, session: Session) throws {
        let sync = channel.pipeline.syncOperations
        try sync.addHandler(tls)
        try sync.addHandler(reporter)
        try sync.addHandler(session.timer)
        try sync.addHandler(NIOTypedApplicationProtocolNegotiationHandler<Void> { result, channel in
            // Called on the channel's loop inside the handshake's event, before
            // pinproxy's own handshake event and before any application byte.
            do {
                try addHTTPLayers(channel, result: result, session: session)
            } catch {
                session.logger.error("could not set up HTTP on an intercepted session", metadata: ["error": "\(error)"])
                channel.close(promise: nil)
            }
            return channel.eventLoop.makeSucceededVoidFuture()
        })
    }

    /// The layers for what ALPN settled (an intercepted session's `h2` only if
    /// `http2:` offered it: see `ProxyServices.interceptionContext`).
    static func addHTTPLayers(_ channel: any Channel, result: ALPNResult, session: Session) throws {
        switch result {
        case .negotiated("h2"):
            // The timer this builder added, and only it, leaves.
            channel.pipeline.syncOperations.removeHandler(session.timer, promise: nil)
            try InterceptedHTTP2Pipeline.configure(channel, limits: session.limits, logger: session.logger,
                                                   makeExchangeHandler: session.makeStreamExchange)
        case .negotiated, .fallback:
            try HTTP1ServerPipeline.configure(channel.pipeline.syncOperations, timer: session.timer, timerInPlace: true,
                                              exchange: session.makeHTTP1Exchange(), limits: session.limits)
        }
    }
}
