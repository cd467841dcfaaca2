import Logging
import NIOCore
import PinproxyMetrics
import PinproxyTLS

/// Right after an intercepted session's `TLSHandler`, until the handshake
/// ends: counts the app's handshake with pinproxy, and says why one failed.
/// It is there before ALPN has chosen the HTTP layers, so a failed handshake
/// (no HTTP layer yet) is still counted and logged. A good handshake is its
/// last event: it leaves the pipeline, where it would only pass every later
/// read and error on (a hop per read for the connection's life).
final class ClientHandshakeReporter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    let services: ProxyServices
    let clientAddress: String
    let connectHost: String
    /// The server name the app sent in its TLS hello, for the log (set by the certificate selector).
    var clientSNI: String?
    private var handshakeDone = false

    init(services: ProxyServices, clientAddress: String, connectHost: String) {
        self.services = services
        self.clientAddress = clientAddress
        self.connectHost = connectHost
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .handshakeCompleted = event as? TLSUserEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        handshakeDone = true
        services.instrumentation.clientHandshake(.ok)
        // `TLSHandler` fires NIO's handshake event (ALPN's, which put the
        // HTTP layers in) before this one: the layers are there to take over.
        context.fireUserInboundEventTriggered(event)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !handshakeDone else {
            context.fireErrorCaught(error)  // the HTTP layers' to handle
            return
        }
        if let tls = error as? TLSError {
            clientTLSFailed(tls)
        } else {
            services.logger.debug("client connection error", metadata: ["client": "\(clientAddress)", "error": "\(error)"])
        }
        context.close(promise: nil)
    }

    /// An app's TLS with pinproxy failed: counted, and said at warning level
    /// with the app's address, the CONNECT host and the SNI. An app that does
    /// not trust pinproxy's CA is the most common first-hour failure, and it
    /// must not be a quiet info line.
    private func clientTLSFailed(_ error: TLSError) {
        let result: ClientHandshakeResult
        switch error {
        case .certificateRejected: result = .untrustedCA
        case .tlsVersion: result = .tlsVersion
        case .tlsCipher: result = .tlsCipher
        case .verifyFailed, .tlsHandshake, .uncleanShutdown, .protocolFailure, .configuration: result = .tlsHandshake
        }
        var metadata: Logger.Metadata = [
            "client": "\(clientAddress)", "result": "\(result.rawValue)", "error": "\(error)", "connect_host": "\(connectHost)",
        ]
        if let clientSNI { metadata["sni"] = "\(clientSNI)" }
        if result == .untrustedCA {
            metadata["hint"] = "the app does not trust pinproxy's CA: install the certificate from `pinproxy ca export` in its trust store"
        }
        services.instrumentation.clientHandshake(result)
        services.logger.warning("client TLS handshake failed", metadata: metadata)
    }
}
