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
    /// The same, offering only `http/1.1` (main config `http2: false`).
    let interceptionContextHTTP1: TLSContext
    let connector: UpstreamConnector
    let pool: UpstreamPool
    let instrumentation: any ProxyInstrumentation
    let logger: Logger
    let accessLog: AccessLog
    /// Bearer tokens for `auth.spotify` (nil until the sessions are set up).
    let tokens = TokenProviderSlot()
    /// `Proxy-Authorization` checks, with their cache and per-address limit (docs/contract.md §15).
    let authenticator = ClientAuthenticator()

    init(store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation, logger: Logger, accessLog: Logger,
         dialer: UpstreamDialer? = nil) throws {
        self.store = store
        self.ca = ca
        self.instrumentation = instrumentation
        self.logger = logger
        self.accessLog = AccessLog(accessLog)
        var interception = TLSConfiguration.server(minimumVersion: .v1_2)
        interception.applicationProtocols = ["h2", "http/1.1"]
        self.interceptionContext = try TLSContext(configuration: interception)
        self.interceptionContextHTTP1 = try TLSContext(configuration: .server(minimumVersion: .v1_2))
        // The guard follows reloads: each dial reads the current snapshot's `network`.
        self.connector = UpstreamConnector(
            addressGuard: { AddressGuard(store.snapshot.config.network) }, instrumentation: instrumentation, logger: logger, dialer: dialer)
        self.pool = UpstreamPool(maxIdleTime: TimeAmount(store.snapshot.config.limits.idleTimeout))
    }

    typealias CheckedOut = (connection: UpstreamConnection, reused: Bool)

    /// An idle pooled connection at once, or one still to come (a dial, a
    /// stream, a place in line).
    enum Checkout {
        case pooled(UpstreamConnection)
        case pending(EventLoopFuture<CheckedOut>)
    }

    /// An upstream connection for `plan` on `loop`: an idle pooled one, or a
    /// new one dialled under a pool slot (the slot is returned if the dial fails).
    func checkout(_ plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<CheckedOut> {
        switch checkoutNow(plan, on: loop) {
        case .pooled(let connection): return loop.makeSucceededFuture((connection, true))
        case .pending(let future): return future
        }
    }

    /// As `checkout`, with no future when an idle pooled connection is there
    /// (the keep-alive request's common case).
    func checkoutNow(_ plan: DialPlan, on loop: any EventLoop) -> Checkout {
        let policy = plan.policy
        // Only TLS negotiates HTTP/2 (ALPN); `upstream_protocol: http1` never offers it.
        let mayMultiplex = plan.tls && policy?.spec.upstreamProtocol != .http1 && !plan.requiresHTTP1
        let acquired = pool.acquireNow(
            plan.poolKey, limit: policy?.spec.maxUpstreamConnections ?? 64,
            queueTimeout: TimeAmount(policy?.spec.queueTimeout ?? .seconds(5)), mayMultiplex: mayMultiplex, on: loop)
        switch acquired {
        case .ready(.connection(let connection)):
            return .pooled(connection)
        case .ready(let lease):
            // A stream on another loop's HTTP/2 connection (at the limit) is opened there.
            return .pending(connection(for: lease, plan: plan, on: loop).hop(to: loop))
        case .queued(let future):
            return .pending(future.flatMap { self.connection(for: $0, plan: plan, on: loop) })
        }
    }

    /// What a lease comes to: the pooled connection itself, a stream on an
    /// HTTP/2 connection, or a new connection dialled under a permit.
    private func connection(for lease: UpstreamPool.Lease, plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<CheckedOut> {
        let policy = plan.policy
        switch lease {
        case .connection(let connection):
            return loop.makeSucceededFuture((connection, true))
        case .stream(let connection):
            return openStream(on: connection, policy: policy, reused: true)
        case .permit:
            return connector.connect(plan, on: loop).flatMap { connection in
                self.pool.opened(connection)
                self.instrumentation.upstreamConnections(policy: policy, delta: 1)
                connection.onClose = {
                    self.pool.closed(connection)
                    self.instrumentation.upstreamConnections(policy: policy, delta: -1)
                }
                if let multiplexer = connection.multiplexer {
                    multiplexer.handler.onCapacity = { [pool = self.pool] capacity in
                        pool.streamCapacityChanged(connection, to: capacity)
                    }
                    return self.openStream(on: connection, policy: policy, reused: false)
                }
                return loop.makeSucceededFuture((connection, false))
            }.flatMapError { error in
                self.pool.permitReturned(plan.poolKey)
                return loop.makeFailedFuture(error)
            }
        }
    }

    /// A stream on a pooled HTTP/2 connection (its place in the pool is counted
    /// already; given back if the stream cannot be opened).
    private func openStream(on connection: UpstreamConnection, policy: HostPolicy?, reused: Bool) -> EventLoopFuture<CheckedOut> {
        connection.multiplexer!.openStream(on: connection).map { stream in
            self.instrumentation.upstreamStreams(policy: policy, delta: 1)
            stream.channel.closeFuture.whenComplete { _ in self.instrumentation.upstreamStreams(policy: policy, delta: -1) }
            return (stream, reused)
        }.flatMapError { error in
            self.pool.streamEnded(on: connection)
            return connection.channel.eventLoop.makeFailedFuture(ProxyError(.connectFailed, host: connection.key.host,
                detail: "could not open an HTTP/2 stream to \(connection.key.host): \(UpstreamConnector.describe(error))"))
        }
    }

    /// One answered request: counted (status, duration, bytes under the
    /// policy's label) and written to the access log.
    func recordAccess(_ record: AccessRecord, policy: HostPolicy?) {
        recordAccess(record, to: instrumentation.trafficRecorder(policy: policy))
    }

    /// As above, counted in series the caller resolved once (`TrafficRecorder`).
    func recordAccess(_ record: AccessRecord, to traffic: any TrafficRecorder) {
        traffic.requestCompleted(status: record.status, seconds: record.seconds,
                                 client: ClientPrincipal.label(record.identity), protocol: record.clientProtocol.metricLabel)
        traffic.bytes(up: record.bytesUp, down: record.bytesDown)
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
