import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// Everything a client connection needs, shared by all of them.
final class ProxyServices: Sendable {
    let store: PolicyStore
    let ca: CertificateAuthority
    /// The interception leg's server context: one SSL_CTX, certificates chosen per CONNECT host.
    let interceptionContext: TLSContext
    let connector: UpstreamConnector
    let pool: UpstreamPool
    let instrumentation: any ProxyInstrumentation
    let logger: Logger
    let accessLog: Logger
    /// Bearer tokens for `auth.spotify` (nil until the sessions are set up).
    let tokens = TokenProviderSlot()

    init(store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation, logger: Logger, accessLog: Logger) throws {
        self.store = store
        self.ca = ca
        self.instrumentation = instrumentation
        self.logger = logger
        self.accessLog = accessLog
        self.interceptionContext = try TLSContext(configuration: .server(minimumVersion: .v1_2))
        let network = store.snapshot.config.network
        self.connector = UpstreamConnector(addressGuard: AddressGuard(network), instrumentation: instrumentation, logger: logger)
        self.pool = UpstreamPool(maxIdleTime: TimeInterval(store.snapshot.config.limits.idleTimeout.components.seconds))
    }

    /// The decoder limits for request heads (`max_header_bytes`).
    static func decoderLimits(_ limits: PinproxyConfig.Limits) -> NIOHTTPDecoderLimitConfiguration {
        var configuration = NIOHTTPDecoderLimitConfiguration()
        configuration.maxHeaderListSize = limits.maxHeaderBytes
        configuration.maxHeaderFieldSize = limits.maxHeaderBytes
        return configuration
    }
}
