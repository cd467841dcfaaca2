import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOConcurrencyHelpers
import PinproxyAdmin
import PinproxyMetrics
import PinproxyPolicy
import PinproxyServer
import PinproxySessionStore
import PinproxySpotify
import PinproxyTLS
import ServiceLifecycle
import UnixSignals

/// `pinproxy run`: serve until SIGTERM/SIGINT (docs/contract.md §2, §10).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Serve: the proxy listener, policy reload (SIGHUP, file watch), graceful shutdown.")

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    func run() async throws {
        if let config, !FileManager.default.fileExists(atPath: config) {
            standardError("pinproxy run: config file \(config) does not exist")
            throw ExitCode(2)
        }
        // Load without logging: `log.format` is only known once the main file
        // is read, and a `Logger` made before the bootstrap below would write
        // swift-log's default text to stderr for the rest of the process.
        let loader = PolicyLoader(configFile: config)
        let loaded = loader.load()
        guard let initial = loaded.snapshot else {
            loaded.errors.forEach { standardError($0.description) }
            standardError("pinproxy run: the configuration is invalid; nothing was started")
            throw ExitCode(1)
        }
        let settings = initial.config
        if settings.concurrency > 0 {
            // Before anything creates the shared event-loop group.
            NIOSingletons.groupLoopCountSuggestion = settings.concurrency
        }
        LogFormatBootstrap.bootstrap(settings.log)
        let logger = Logger(label: "pinproxy")
        // Made after the bootstrap, so its reload lines take the configured format too.
        let store = PolicyStore(loader: loader, initial: initial)
        if let files = OpenFilesLimit.raiseSoftToHard() {
            let metadata: Logger.Metadata = [
                "soft_at_start": "\(files.before)", "soft": "\(files.after)", "hard": "\(files.hard)",
            ]
            if let failure = files.failure {
                logger.warning("cannot raise the open files limit", metadata: metadata.merging(["error": "\(failure)"]) { $1 })
            } else {
                logger.info("open files limit", metadata: metadata)
            }
        }
        for warning in initial.warnings {
            logger.warning("\(warning.message)", metadata: warning.logMetadata)
        }

        let ca: CertificateAuthority
        do {
            let (loaded, created) = try CertificateAuthority.loadOrCreate(
                certificatePath: settings.ca.certificatePath, keyPath: settings.ca.keyPath, chainPath: settings.ca.chainPath)
            ca = loaded
            logger.info(created ? "created the interception CA" : "loaded the interception CA", metadata: [
                "certificate": "\(settings.ca.certificatePath)", "subject": "\(ca.certificate.subject)",
                "issuer": "\(ca.certificate.issuer)", "sha256": "\(ca.certificate.fingerprintSHA256)",
                "chain": "\(ca.chain.count)",
            ])
        } catch {
            logger.critical("cannot use the interception CA", metadata: ["error": "\(PinCommand.reason(error))"])
            throw ExitCode(1)
        }

        let metrics = PinproxyMetrics()
        metrics.buildInfo(version: Pinproxy.version)
        let readiness = ReadinessState(policyLoaded: true, caUsable: true)
        let tokenSessions = NIOLockedValueBox<SessionTokenProvider?>(nil)
        // Type=notify (examples/systemd): READY=1 once both listeners are up, STOPPING=1 when the drain begins.
        let systemd = SystemdNotify()
        let notice = ReadinessNotice(waitingFor: ["proxy", "admin"], notify: systemd)
        let proxy = try ProxyServer(
            store: store, ca: ca, instrumentation: MetricsInstrumentation(metrics), logger: logger,
            accessLog: Logger(label: "pinproxy.access"),
            onListening: { _ in
                readiness.setListening(true)
                notice.listening("proxy")
                // Warm every session's cache once the path to accounts can serve.
                tokenSessions.withLockedValue { $0 }?.prefetchAll()
            },
            onDraining: {
                readiness.setListening(false)
                systemd.send("STOPPING=1\nSTATUS=draining")
            })
        // The store the replicas share their sessions through (docs/contract.md §12).
        let sessionStore: PostgresSessionStore?
        if let storeConfig = settings.spotify.store {
            do {
                metrics.storeUp(false)
                sessionStore = try PostgresSessionStore(config: storeConfig, logger: Logger(label: "pinproxy.store"),
                                                        onChange: { metrics.storeUp($0) })
                logger.info("Spotify sessions shared through the session store", metadata: [
                    "host": "\(storeConfig.host)", "port": "\(storeConfig.port)", "database": "\(storeConfig.database)",
                    "tls": "\(storeConfig.tls.rawValue)",
                ])
            } catch {
                logger.critical("cannot set up the session store", metadata: ["error": "\(error)"])
                throw ExitCode(1)
            }
        } else {
            sessionStore = nil
        }
        // Spotify sessions: their token requests go through the proxy's own path.
        let sessions = SessionTokenProvider(
            config: settings.spotify, credentials: settings.credentials, events: .metrics(metrics), logger: Logger(label: "pinproxy.spotify"),
            shared: sessionStore, endpoint: { spotify, session in ProxiedTokenEndpoint.of(session, spotify: spotify, proxy: proxy) })
        proxy.setTokenProvider(sessions)
        // Upstream 429 windows, shared across replicas through the store (docs/contract.md §12).
        if let sessionStore {
            proxy.shareThrottleWindows { window in Task { await sessionStore.publish(window) } }
            sessionStore.followThrottleWindows { windows in
                for window in proxy.adoptThrottleWindows(windows) {
                    logger.notice("upstream rate limited a credential through another replica; holding its requests back here too", metadata: [
                        "credential": "\(window.credential)", "host": "\(window.host)",
                        "until": "\(ISO8601DateFormatter().string(from: window.until))",
                    ])
                }
            }
        }
        store.addObserver { event in
            if case .success = event.outcome {
                sessions.update(event.current.config.spotify, credentials: event.current.config.credentials)
                sessions.prefetchAll()
            }
        }
        tokenSessions.withLockedValue { $0 = sessions }
        let admin = AdminServer(
            listen: settings.admin.listen, store: store, metrics: metrics,
            providers: .init(readiness: {
                var status = readiness.status
                status.accepting = proxy.acceptHealth.isAccepting()
                return status
            }, readinessDetails: {
                let accept = proxy.acceptHealth.recentFailure().map { ["the proxy listener cannot accept connections: \($0.reason)"] } ?? []
                let store = sessionStore?.problem.map { ["the session store cannot be reached: \($0)"] } ?? []
                return accept + store + sessions.readinessDetails
            }, probe: { pattern in
                proxy.probes.result(for: pattern).map(ProbeStatus.init)
            }, observed: { proxy.observedPins.hosts },
            verdicts: { proxy.observedPins.verdicts(forPolicy: $0) },
            sessions: { sessions.summaries },
            refusals: { proxy.observedPins.refusals(forPolicy: $0, since: $1) },
            probeNow: { host in await proxy.probes.probeNow(host: host).map(ProbeStatus.init) }),
            onListening: { _ in notice.listening("admin") })
        // A graceful shutdown stops services in reverse order: the proxy, last
        // here, first (its listener closes at once, then it drains), and the
        // admin API, first here, last, so /readyz answers 503 during the drain.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        // First here, so it stops last: sessions may still refresh while the proxy drains.
        if let sessionStore { services.append(.init(service: sessionStore)) }
        services += [
            .init(service: admin),
            .init(service: PolicyReloadSignalService(store: store)),
            .init(service: PolicyFileWatcher(store: store)),
            .init(service: proxy.probes),
        ]
        // The token swap backend: its own listener, its accounts calls through the proxy's path.
        if let swapConfig = settings.spotify.swap {
            let swap: TokenSwap
            do {
                swap = try TokenSwap(
                    config: settings.spotify,
                    endpoint: ProxiedTokenEndpoint(proxy: proxy, accounts: settings.spotify.accounts, timeout: settings.spotify.tokenTimeout),
                    logger: Logger(label: "pinproxy.swap"))
            } catch {
                logger.critical("cannot start the token swap backend", metadata: ["error": "\(error)"])
                throw ExitCode(1)
            }
            services.append(.init(service: SwapServer(listen: swapConfig.listen, swap: swap, metrics: metrics)))
        }
        services.append(.init(service: proxy))
        let group = ServiceGroup(configuration: .init(
            services: services,
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        // The line that says why it is going away (the service group's own is at debug).
        // Trapping the signals here ignores them for the process before the group
        // traps them too: a SIGTERM in between would reach this sequence alone, so
        // it also asks the group to shut down (a no-op when the group saw it too;
        // remembered when the group has not started yet). scripts/startup-loop
        // found that window.
        let grace = "\(settings.limits.shutdownGrace.components.seconds)s"
        let signalLog = Task {
            for await signal in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                logger.notice("shutdown requested: no longer accepting, draining connections",
                              metadata: ["signal": "\(signal)", "shutdown_grace": "\(grace)"])
                await group.triggerGracefulShutdown()
            }
        }
        defer { signalLog.cancel() }
        do {
            try await group.run()
        } catch {
            // A service that ends with an error (a listener that cannot bind)
            // stops the others; say which and why, and exit 1.
            logger.critical("stopped: a service failed", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        logger.info("stopped")
    }
}

extension ProbeStatus {
    init(_ result: ProbeResult) {
        self.init(success: result.success, at: result.at, leafNotAfter: result.leafNotAfter, verdict: result.verdict,
                  error: result.error, detail: result.detail)
    }
}
