import Logging
import PinproxyMetrics
import PinproxyTLS

/// The app's TLS handshake with pinproxy's interception certificate, when it
/// fails (the most common first-hour failure: the app does not trust the CA).
extension HTTPExchangeHandler {
    /// An app's TLS with pinproxy failed: counted, and said at warning level
    /// with the app's address, the CONNECT host and the SNI. An app that does
    /// not trust pinproxy's CA is the most common first-hour failure, and it
    /// must not be a quiet info line.
    func clientTLSFailed(_ error: TLSError) {
        guard !clientHandshakeDone else { return clientTLSEndedAfterHandshake(error) }
        let result: ClientHandshakeResult
        switch error {
        case .certificateRejected: result = .untrustedCA
        case .tlsVersion: result = .tlsVersion
        case .tlsCipher: result = .tlsCipher
        case .verifyFailed, .tlsHandshake, .uncleanShutdown, .protocolFailure, .configuration: result = .tlsHandshake
        }
        var metadata: Logger.Metadata = ["client": "\(clientAddress)", "result": "\(result.rawValue)", "error": "\(error)"]
        if let interception { metadata["connect_host"] = "\(interception.host)" }
        if let clientSNI { metadata["sni"] = "\(clientSNI)" }
        if result == .untrustedCA {
            metadata["hint"] = "the app does not trust pinproxy's CA: install the certificate from `pinproxy ca export` in its trust store"
        }
        services.instrumentation.clientHandshake(result)
        services.logger.warning("client TLS handshake failed", metadata: metadata)
    }

    /// A TLS error after a good handshake was counted `ok` already and is no
    /// handshake result. The common one is an app that hangs up without
    /// close_notify once its response is framed (most HTTP clients do):
    /// routine, so debug; anything else (a bad record, a protocol error) is
    /// said at info, still without counting it as a handshake.
    private func clientTLSEndedAfterHandshake(_ error: TLSError) {
        var metadata: Logger.Metadata = ["client": "\(clientAddress)", "error": "\(error)"]
        if let interception { metadata["connect_host"] = "\(interception.host)" }
        if case .uncleanShutdown = error {
            services.logger.debug("client closed without close_notify", metadata: metadata)
        } else {
            services.logger.info("client TLS error after the handshake", metadata: metadata)
        }
    }
}
