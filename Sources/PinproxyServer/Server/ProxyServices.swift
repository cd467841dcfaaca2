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
    let accessLog: AccessLog
    /// Bearer tokens for `auth.spotify` (nil until the sessions are set up).
    let tokens = TokenProviderSlot()
    /// `Proxy-Authorization` checks, with their cache and per-address limit (docs/contract.md §15).
    let authenticator = ClientAuthenticator()

    init(store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation, logger: Logger, accessLog: Logger) throws {
        self.store = store
        self.ca = ca
        self.instrumentation = instrumentation
        self.logger = logger
        self.accessLog = AccessLog(accessLog)
        self.interceptionContext = try TLSContext(configuration: .server(minimumVersion: .v1_2))
        let network = store.snapshot.config.network
        self.connector = UpstreamConnector(addressGuard: AddressGuard(network), instrumentation: instrumentation, logger: logger)
        self.pool = UpstreamPool(maxIdleTime: TimeAmount(store.snapshot.config.limits.idleTimeout))
    }

    /// An upstream connection for `plan` on `loop`: an idle pooled one, or a
    /// new one dialled under a pool slot (the slot is returned if the dial fails).
    func checkout(_ plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<(connection: UpstreamConnection, reused: Bool)> {
        let policy = plan.policy
        return pool.acquire(
            plan.poolKey, limit: policy?.spec.maxUpstreamConnections ?? 64,
            queueTimeout: TimeAmount(policy?.spec.queueTimeout ?? .seconds(5)), on: loop
        ).flatMap { lease in
            switch lease {
            case .connection(let connection):
                return loop.makeSucceededFuture((connection, true))
            case .permit:
                return self.connector.connect(plan, on: loop).map { connection in
                    self.pool.opened(connection)
                    self.instrumentation.upstreamConnections(policy: policy, delta: 1)
                    connection.onClose = {
                        self.pool.closed(connection)
                        self.instrumentation.upstreamConnections(policy: policy, delta: -1)
                    }
                    return (connection, false)
                }.flatMapError { error in
                    self.pool.permitReturned(plan.poolKey)
                    return loop.makeFailedFuture(error)
                }
            }
        }
    }

    /// One answered request: counted (status, duration, bytes under the
    /// policy's label) and written to the access log.
    func recordAccess(_ record: AccessRecord, policy: HostPolicy?) {
        instrumentation.requestCompleted(policy: policy, status: record.status, seconds: record.seconds,
                                         client: ClientPrincipal.label(record.identity))
        instrumentation.bytes(policy: policy, up: record.bytesUp, down: record.bytesDown)
        record.log(to: accessLog)
    }

    /// The decoder limits for request heads (`max_header_bytes`).
    static func decoderLimits(_ limits: PinproxyConfig.Limits) -> NIOHTTPDecoderLimitConfiguration {
        var configuration = NIOHTTPDecoderLimitConfiguration()
        configuration.maxHeaderListSize = limits.maxHeaderBytes
        configuration.maxHeaderFieldSize = limits.maxHeaderBytes
        configuration.maxHeaderFieldCount = MessageRules.maxHeaderCount
        return configuration
    }
}
