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
}
