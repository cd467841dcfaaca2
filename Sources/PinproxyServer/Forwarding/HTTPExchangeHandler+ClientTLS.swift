import Logging
import PinproxyTLS

/// The app's TLS with pinproxy ending after a good handshake (the handshake
/// itself is `ClientHandshakeReporter`'s).
extension HTTPExchangeHandler {
    /// A TLS error after a good handshake was counted `ok` already and is no
    /// handshake result. The common one is an app that hangs up without
    /// close_notify once its response is framed (most HTTP clients do):
    /// routine, so debug; anything else (a bad record, a protocol error) is
    /// said at info, still without counting it as a handshake.
    func clientTLSEndedAfterHandshake(_ error: TLSError) {
        var metadata: Logger.Metadata = ["client": "\(clientAddress)", "error": "\(error)"]
        if let interception { metadata["connect_host"] = "\(interception.host)" }
        if case .uncleanShutdown = error {
            services.logger.debug("client closed without close_notify", metadata: metadata)
        } else {
            services.logger.info("client TLS error after the handshake", metadata: metadata)
        }
    }
}
