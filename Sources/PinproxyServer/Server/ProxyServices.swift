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
    /// Upstream connections for requests: pooled, streams, or dialled.
    let upstreams: UpstreamCheckout
    let instrumentation: any ProxyInstrumentation
    let logger: Logger
    let accessLog: AccessLog
    /// Bearer tokens for `auth.spotify` (nil until the sessions are set up).
    let tokens = TokenProviderSlot()
    /// Upstream 429 windows per (credential, host): `upstream_throttled` (docs/contract.md §4).
    let throttle: UpstreamThrottle
    /// Policies' `rate_limit` buckets: `rate_limited` (docs/contract.md §4).
    let rateLimiter: RateLimiter
    /// `Proxy-Authorization` checks, with their cache and per-address limit (docs/contract.md §15).
    let authenticator: ClientAuthenticator

    /// `dialer` and `clock` are the real ones unless a test (or a fuzz target,
    /// for `dialer`) injects its own: the product never passes them.
    init(store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation, logger: Logger, accessLog: Logger,
         dialer: UpstreamDialer? = nil, clock: ServicesClock = .system) throws {
        self.store = store
        self.ca = ca
        self.instrumentation = instrumentation
        self.logger = logger
        self.accessLog = AccessLog(accessLog)
        self.throttle = UpstreamThrottle(clock: clock.date)
        self.rateLimiter = RateLimiter(clock: clock.date)
        self.authenticator = ClientAuthenticator(now: clock.instant)
        var interception = TLSConfiguration.server(minimumVersion: .v1_2)
        interception.applicationProtocols = ["h2", "http/1.1"]
        self.interceptionContext = try TLSContext(configuration: interception)
        self.interceptionContextHTTP1 = try TLSContext(configuration: .server(minimumVersion: .v1_2))
        // The guard follows reloads: each dial reads the current snapshot's `network`.
        self.connector = UpstreamConnector(
            addressGuard: { AddressGuard(store.snapshot.config.network) }, instrumentation: instrumentation,
            clock: clock.date, logger: logger, dialer: dialer)
        self.pool = UpstreamPool(maxIdleTime: TimeAmount(store.snapshot.config.limits.idleTimeout))
        self.upstreams = UpstreamCheckout(pool: pool, connector: connector, instrumentation: instrumentation)
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
}

/// The time the services' own decisions read: pin windows and expiry, the
/// policies' `rate_limit` buckets, upstream 429 windows, and the failed-login
/// limiter with its credential cache. Real time in the product; only the
/// in-process tests pass another, which they move forward instead of
/// waiting on the wall clock. (Connection deadlines and pool timers run on
/// NIO's scheduler and are not covered.)
struct ServicesClock: Sendable {
    var date: @Sendable () -> Date
    var instant: @Sendable () -> ContinuousClock.Instant

    static let system = ServicesClock(date: { Date() }, instant: { ContinuousClock.now })
}
