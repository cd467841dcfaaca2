import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import PinproxyPolicy
import PinproxyTLS
import ServiceLifecycle

/// The proxy listener (docs/contract.md §1): accepts legacy apps, checks the client
/// ACL before anything else, and gives each connection its HTTP layers.
/// A swift-service-lifecycle service: SIGTERM stops accepting, lets
/// in-flight requests finish within `shutdown_grace`, then closes the rest.
public final class ProxyServer: Service, Sendable {
    let services: ProxyServices
    let group: any EventLoopGroup
    let registry = ConnectionRegistry()
    /// The active pin probes; run it as a service of its own beside this one.
    public let probes: PinProbes
    /// Chains seen upstream and pin verdicts per policy (docs/contract.md §13).
    public var observedPins: ObservedPins { services.connector.observed }
    /// Whether the listener is failing to accept (for `/readyz`).
    public let acceptHealth = AcceptHealth()
    /// Told the bound address once listening (tests bind port 0).
    let onListening: @Sendable (SocketAddress) -> Void
    /// Told when a graceful shutdown starts: the listener is closing and the
    /// drain begins (readiness reports it).
    let onDraining: @Sendable () -> Void

    /// A proxy over `store`'s policies, intercepting with `ca`.
    public convenience init(
        store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation = NoInstrumentation(),
        logger: Logger, accessLog: Logger, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onListening: @escaping @Sendable (SocketAddress) -> Void = { _ in },
        onDraining: @escaping @Sendable () -> Void = {}
    ) throws {
        try self.init(store: store, ca: ca, instrumentation: instrumentation, logger: logger, accessLog: accessLog, group: group,
                      dialer: nil, clock: .system, onListening: onListening, onDraining: onDraining)
    }

    /// As above, with the upstream dialer and the clock given. Only the
    /// in-process tests (Tests/PinproxyServerTests/InProcess) call this: a
    /// dialer that sends names to loopback servers or scripts the upstream,
    /// and a clock they move forward instead of waiting.
    init(
        store: PolicyStore, ca: CertificateAuthority, instrumentation: any ProxyInstrumentation,
        logger: Logger, accessLog: Logger, group: any EventLoopGroup, dialer: UpstreamDialer?, clock: ServicesClock,
        onListening: @escaping @Sendable (SocketAddress) -> Void,
        onDraining: @escaping @Sendable () -> Void
    ) throws {
        self.services = try ProxyServices(store: store, ca: ca, instrumentation: instrumentation, logger: logger, accessLog: accessLog,
                                          dialer: dialer, clock: clock)
        self.group = group
        self.onListening = onListening
        self.onDraining = onDraining
        self.probes = PinProbes(services: services)
        let pool = services.pool
        // Connections opened under a policy that a reload changed are retired;
        // all of them when `network.*` changed, since an address the guard now
        // refuses must not stay reachable through a pooled connection.
        store.addObserver { event in
            if case .success = event.outcome {
                let networkChanged = event.previous.config.network != event.current.config.network
                pool.retire(keeping: networkChanged ? [] : Set(event.current.policies.map(\.digest)))
            }
        }
    }

    /// Where `auth.spotify` tokens come from.
    public func setTokenProvider(_ provider: any BearerTokenProvider) {
        services.tokens.set(provider)
    }

    /// With a session store, upstream 429 windows are shared across replicas
    /// (docs/contract.md §12): each window this replica opens or lengthens
    /// is handed to `publish` (which must not block).
    public func shareThrottleWindows(through publish: @escaping @Sendable (ThrottleWindow) -> Void) {
        services.throttle.share(through: publish)
    }

    /// Windows another replica opened; returns those that opened or lengthened one here (to log).
    public func adoptThrottleWindows(_ windows: [ThrottleWindow]) -> [ThrottleWindow] {
        services.throttle.adopt(windows)
    }

    /// A request pinproxy sends itself (the token endpoint), through the
    /// target host's policy, pins and pool. Returns (status, headers, body).
    public func send(method: String, url: String, headers: [(String, String)], body: [UInt8], timeout: Duration) async throws
        -> (status: Int, headers: [(String, String)], body: [UInt8]) {
        guard let target = AbsoluteTarget(url) else {
            throw ProxyError(.badRequest, host: nil, detail: "not an absolute http(s) URL: \(url)")
        }
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: target.originForm)
        let hostHeader = target.authority.port.map { "\(target.authority.host):\($0)" } ?? target.authority.host
        head.headers.add(name: "Host", value: hostHeader)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        head.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        head.headers.add(name: "User-Agent", value: "pinproxy")
        let response = try await UpstreamRequester(services: services, group: group).send(head, body: body, to: target, timeout: TimeAmount(timeout)).get()
        return (response.status, response.headers, response.body)
    }

    public func run() async throws {
        let config = services.store.snapshot.config
        let listen = config.listen
        let limits = config.limits
        let services = self.services
        let registry = self.registry
        let acceptHealth = self.acceptHealth
        // Knows every accepted connection; on shutdown it closes the listener,
        // sends each connection `ChannelShouldQuiesceEvent` (idle ones close,
        // busy ones finish their response; an h2 session answers with GOAWAY)
        // and completes once the last one has closed.
        let quiesce = ServerQuiescingHelper(group: group)
        let channel = try await ServerChannelPipeline.bootstrap(group: group, limits: limits, services: services,
                                                                quiesce: quiesce, acceptHealth: acceptHealth)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    registry.add(channel)
                    try Self.configureClient(channel, services: services)
                }
            }
            .bind(host: listen.host, port: listen.port).get()
        let address = channel.localAddress!
        services.logger.info("proxy listening", metadata: ["address": "\(address.hostPort)"])
        // One quiescing helper per listening socket: a helper knows only the
        // first server channel it made a handler for, so a shared one would
        // leave the transparent listener open, and its connections unquiesced,
        // during the drain.
        var transparentQuiesce: ServerQuiescingHelper?
        if let transparent = config.transparent {
            let helper = ServerQuiescingHelper(group: group)
            let bound = try await TransparentListener.bind(transparent.listen, services: services, group: group,
                                                           quiesce: helper, registry: registry, acceptHealth: acceptHealth)
            transparentQuiesce = helper
            services.logger.info("transparent listening", metadata: ["address": "\(bound.localAddress?.hostPort ?? "?")"])
        }
        let quiescers = [quiesce] + (transparentQuiesce.map { [$0] } ?? [])
        onListening(address)

        // A graceful shutdown (SIGTERM) and a cancellation (another service
        // failed, e.g. the admin API could not bind) both end here: waiting on
        // the listener's close alone would ignore the cancellation, and the
        // process would stay up half-started.
        try await withTaskCancellationOrGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onCancelOrGracefulShutdown: { [onDraining] in
            // The listeners close first, so a new connection is refused at once.
            onDraining()
            for helper in quiescers { helper.initiateShutdown(promise: nil) }
        }
        // However the listener ended, the connections now drain: the same
        // promises whether the shutdown above started it or this call does.
        let drainedEach = quiescers.map { helper in
            let drained = channel.eventLoop.makePromise(of: Void.self)
            helper.initiateShutdown(promise: drained)
            return drained.futureResult
        }
        let drained = channel.eventLoop.makePromise(of: Void.self)
        EventLoopFuture.andAllComplete(drainedEach, promise: drained)
        let cutOff = channel.eventLoop.scheduleTask(in: TimeAmount(limits.shutdownGrace)) { registry.closeAll() }
        try? await drained.futureResult.get()
        cutOff.cancel()
        let cut = (try? await cutOff.futureResult.get()) ?? 0
        services.pool.closeIdle()
        if cut > 0 {
            services.logger.warning("shutdown grace ran out", metadata: ["connections_cut_off": "\(cut)"])
        } else {
            services.logger.info("all client connections finished")
        }
    }

    /// A new client: the ACL first (403 `client_denied` before anything else), then HTTP.
    static func configureClient(_ channel: any Channel, services: ProxyServices) throws {
        let snapshot = services.store.snapshot
        let remote = channel.remoteAddress
        let client = remote?.hostPort ?? "?"
        if let why = ClientNetworkACL.refusal(address: remote?.addressBytes, config: snapshot.config) {
            let refusal = ProxyError(.clientDenied, host: nil, detail: why)
            services.instrumentation.denied(code: refusal.code)
            services.instrumentation.requestCompleted(policy: nil, status: 403, seconds: 0)
            services.logger.notice("client refused", metadata: ["client": "\(client)", "error": "client_denied"])
            channel.writeAndFlush(ByteBuffer(string: RefusalBody.raw(refusal))).assumeIsolated().whenComplete { _ in
                LingeringClose.close(channel)
            }
            return
        }
        services.instrumentation.clientConnections(delta: 1)
        channel.closeFuture.whenComplete { _ in services.instrumentation.clientConnections(delta: -1) }

        try ListenerPipeline.configure(channel, services: services, clientAddress: client, limits: snapshot.config.limits)
    }
}

extension SocketAddress {
    /// `127.0.0.1:8080` / `[::1]:8080`.
    public var hostPort: String {
        "\(HostPort.bracketed(ipAddress ?? "?")):\(port ?? 0)"
    }
}
