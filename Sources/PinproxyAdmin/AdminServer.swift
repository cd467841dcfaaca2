import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import PinproxyMetrics
import PinproxyPolicy
import ServiceLifecycle

/// The admin HTTP API (docs/contract.md §5) on `admin.listen`: the status page `/` (§13), `/metrics`, `/healthz`,
/// `/readyz`, `/policies`, `POST /reload`, `POST /probe`. A swift-service-lifecycle
/// `Service`: run it in the process's `ServiceGroup`; graceful shutdown
/// stops accepting and lets requests in flight finish.
///
/// It binds exactly the address it is given (the config's `admin.listen`,
/// `127.0.0.1:9090` by default): a non-loopback address only when the
/// configuration wrote one. Port 0 binds an ephemeral port; `boundAddress`
/// and `onListening` say which.
public struct AdminServer: Service {
    /// The closures through which the server sees the rest of the process.
    public struct Providers: Sendable {
        /// The three `/readyz` checks.
        public var readiness: @Sendable () -> ReadinessStatus
        /// Extra `/readyz` lines (a Spotify session needing re-authorisation…).
        /// Informational: they do not turn a 200 into a 503.
        public var readinessDetails: @Sendable () -> [String]
        /// The last probe of a policy, by its `match` pattern as written.
        public var probe: @Sendable (_ pattern: String) -> ProbeStatus?
        /// Chains seen upstream, per host name (docs/contract.md §13 `observed`).
        public var observed: @Sendable () -> [ObservedHost]
        /// A policy's pin verdict counts since start, by label.
        public var verdicts: @Sendable (_ pattern: String) -> [String: Int]
        /// The Spotify sessions' state, for the status page.
        public var sessions: @Sendable () -> [SessionSummary]
        /// A policy's refusals by the pins since a time (client traffic), for the
        /// status page's "failing now".
        public var refusals: @Sendable (_ pattern: String, _ since: Date) -> [(at: Date, code: RefusalCode)]
        /// `POST /probe?host=H`: probe the intercepted policy matching H now and
        /// return its result; nil (the closure's) when no such policy exists.
        public var probeNow: (@Sendable (_ host: String) async -> ProbeStatus?)?

        public init(
            readiness: @escaping @Sendable () -> ReadinessStatus,
            readinessDetails: @escaping @Sendable () -> [String] = { [] },
            probe: @escaping @Sendable (_ pattern: String) -> ProbeStatus? = { _ in nil },
            observed: @escaping @Sendable () -> [ObservedHost] = { [] },
            verdicts: @escaping @Sendable (_ pattern: String) -> [String: Int] = { _ in [:] },
            sessions: @escaping @Sendable () -> [SessionSummary] = { [] },
            refusals: @escaping @Sendable (_ pattern: String, _ since: Date) -> [(at: Date, code: RefusalCode)] = { _, _ in [] },
            probeNow: (@Sendable (_ host: String) async -> ProbeStatus?)? = nil
        ) {
            self.refusals = refusals
            self.probeNow = probeNow
            self.readiness = readiness
            self.readinessDetails = readinessDetails
            self.probe = probe
            self.observed = observed
            self.verdicts = verdicts
            self.sessions = sessions
        }
    }

    public let listen: HostPort
    public let limits: AdminLimits
    let store: PolicyStore
    let metrics: PinproxyMetrics
    let providers: Providers
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    let onListening: @Sendable (HostPort) async -> Void
    private let bound = BoundAddress()

    /// - Parameters:
    ///   - listen: usually `store.snapshot.config.admin.listen`.
    ///   - metrics: also made to observe `store` (idempotent), so every
    ///     reload is counted however it was triggered.
    ///   - onListening: called once the socket is bound, with the real port.
    public init(
        listen: HostPort,
        store: PolicyStore,
        metrics: PinproxyMetrics,
        providers: Providers,
        limits: AdminLimits = AdminLimits(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "pinproxy.admin"),
        onListening: @escaping @Sendable (HostPort) async -> Void = { _ in }
    ) {
        self.listen = listen
        self.limits = limits
        self.store = store
        self.metrics = metrics
        self.providers = providers
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onListening = onListening
        metrics.observe(store)
    }

    /// The address actually bound (the real port when `listen` asked for 0).
    /// Waits for the bind; throws if the server failed to start or stopped.
    public var boundAddress: HostPort {
        get async throws { try await bound.value }
    }

    public func run() async throws {
        let app = Application(
            router: makeRouter(),
            // Hummingbird's own idle timer and connection cap (see AdminLimits).
            server: .http1(configuration: .init(idleTimeout: limits.idleTimeout)),
            configuration: ApplicationConfiguration(
                address: .hostname(listen.host, port: listen.port),
                availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections, logger: logger)),
            onServerRunning: { [bound, listen, logger, onListening] channel in
                let port = channel.localAddress?.port ?? listen.port
                let address = HostPort(host: listen.host, port: port)
                logger.info("admin API listening", metadata: ["address": "\(address)"])
                bound.resolve(address)
                await onListening(address)
            },
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: Self.frameworkLogger(logger))
        do {
            try await app.run()
        } catch where !bound.isBound {
            let failure = AdminServerError.bindFailed(address: listen, underlying: "\(error)")
            bound.fail(failure)
            throw failure
        }
        bound.fail(AdminServerError.stopped)
    }
}

public enum AdminServerError: Error, Sendable, CustomStringConvertible {
    /// The server did not start (usually: the address is in use or not local).
    case bindFailed(address: HostPort, underlying: String)
    /// `boundAddress` asked after the server stopped without binding.
    case stopped

    public var description: String {
        switch self {
        case .bindFailed(let address, let underlying): return "admin API cannot listen on \(address): \(underlying)"
        case .stopped: return "admin API stopped"
        }
    }
}
