import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS
import PinproxyTestSupport

@testable import PinproxyServer

/// The real proxy listener inside the test process: `ProxyServer` on an
/// event loop of its own, bound to 127.0.0.1:0, over a policy set written
/// to a temp dir and loaded with `PolicyLoader`, with the CA in that dir for
/// curl's `--cacert`. Real clients (curl, raw sockets) talk to its port;
/// real TLS and the real pin check run against real local servers.
///
/// What the binary would print is kept here instead: every log line (the
/// access log among them) in `recorder`, every metric in `metrics` (the
/// registry `/metrics` renders). Injected: the upstream dialer (`Upstreams`)
/// and the services' clock (`ProxyTestClock`), which a test moves forward
/// instead of waiting for a window or an expiry on the wall clock.
///
/// What only a process shows (signals, systemd notify, start-up and its
/// errors, the admin API, log formats, files on disk) stays with
/// `ProxyHarness` in EndToEndTests. Always `stop()` it (`run` does):
/// the drain, then the event loop's shutdown.
final class InProcessProxy: @unchecked Sendable {  // immutable after init
    /// Where upstream dials go.
    enum Upstreams {
        /// Where the policies say: DNS, or their `upstream:` addresses.
        case direct
        /// Each dial target whose host is a key here goes to that loopback
        /// port instead (a hosts file with ports); the rest as `.direct`.
        /// TCP, TLS, the chain check and the pin check stay real.
        case loopback([String: Int])
        /// A dialer of the test's own (a scripted upstream on an embedded channel).
        case dialer(UpstreamDialer)
    }

    /// Every scenario dials loopback test servers, which the SSRF guard refuses unless allowed.
    static let loopbackAllowed = "network:\n  allow: [127.0.0.0/8]\n"

    let directory: TemporaryDirectory
    let group: MultiThreadedEventLoopGroup
    let server: ProxyServer
    let metrics = PinproxyMetrics()
    let recorder = Recorder()
    let clock: ProxyTestClock
    let port: Int
    private let running: Task<Void, any Error>

    var proxyURL: String { "http://127.0.0.1:\(port)" }
    /// The interception CA's certificate, for curl's `--cacert`.
    var caFile: String { directory.file("state/ca.pem") }

    /// Writes `etc/pinproxy.yaml` (listening on 127.0.0.1:0, `mainConfig`
    /// added) and `etc/policies/test.yaml`, loads them as `pinproxy run`
    /// would, and starts listening. `environment` answers `${VAR}`.
    init(policies: String, mainConfig: String = loopbackAllowed, directory: TemporaryDirectory? = nil,
         upstreams: Upstreams = .direct, clock: ProxyTestClock = ProxyTestClock(), environment: [String: String] = [:]) async throws {
        let dir = try directory ?? TemporaryDirectory("pinproxy-inprocess")
        self.directory = dir
        self.clock = clock
        try dir.write("etc/pinproxy.yaml", "listen: 127.0.0.1:0\npolicies: policies\n" + mainConfig)
        try dir.write("etc/policies/test.yaml", policies)
        let loader = PolicyLoader(configFile: dir.file("etc/pinproxy.yaml"), environment: environment, workingDirectory: dir.path)
        let result = loader.load()
        guard let snapshot = result.snapshot else {
            throw TestSupportError("the test's config did not load: \(result.diagnostics.map { "\($0)" }.joined(separator: "; "))")
        }
        let store = PolicyStore(loader: loader, initial: snapshot)
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        let (ca, _) = try CertificateAuthority.loadOrCreate(certificatePath: dir.file("state/ca.pem"), keyPath: dir.file("state/ca-key.pem"))
        let recorder = self.recorder
        let logger = Logger(label: "pinproxy") { RecordingLogHandler(label: $0, recorder: recorder) }
        let instrumentation = MetricsInstrumentation(metrics)
        let dialer: UpstreamDialer?
        switch upstreams {
        case .direct:
            dialer = nil
        case .loopback(let ports):
            // A connector of its own does the real dial; the proxy's would
            // call this dialer again. Same guard, instrumentation and clock.
            let connector = UpstreamConnector(addressGuard: { AddressGuard(store.snapshot.config.network) },
                                              instrumentation: instrumentation, clock: clock.services.date, logger: logger)
            dialer = .loopback(ports, connector: connector)
        case .dialer(let given):
            dialer = given
        }
        // One thread, its own: not NIO's singleton shared with the suites
        // beside this one, and shut down with the proxy.
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let listening = ListeningPort(group.next().makePromise(of: Int.self))
        do {
            server = try ProxyServer(
                store: store, ca: ca, instrumentation: instrumentation, logger: logger,
                accessLog: Logger(label: "pinproxy.access") { RecordingLogHandler(label: $0, recorder: recorder, logLevel: .info) },
                group: group, dialer: dialer, clock: clock.services,
                onListening: { address in listening.succeed(address.port ?? 0) }, onDraining: {})
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let server = self.server
        running = Task {
            do {
                try await server.run()
            } catch {
                listening.fail(error)
                throw error
            }
        }
        do {
            port = try await listening.port
        } catch {
            running.cancel()
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Starts a proxy, runs `body` with it, and stops it however `body` ends.
    static func run<T>(policies: String, mainConfig: String = loopbackAllowed, directory: TemporaryDirectory? = nil,
                       upstreams: Upstreams = .direct, clock: ProxyTestClock = ProxyTestClock(), environment: [String: String] = [:],
                       _ body: (InProcessProxy) async throws -> T) async throws -> T {
        let proxy = try await InProcessProxy(policies: policies, mainConfig: mainConfig, directory: directory,
                                             upstreams: upstreams, clock: clock, environment: environment)
        do {
            let value = try await body(proxy)
            await proxy.stop()
            return value
        } catch {
            await proxy.stop()
            throw error
        }
    }

    /// The graceful shutdown `pinproxy run` does on SIGTERM (stop accepting,
    /// let connections finish or close them at `shutdown_grace`), then the
    /// event loop's.
    func stop() async {
        running.cancel()
        _ = try? await running.value
        try? await group.shutdownGracefully()
    }

    /// curl through this proxy, trusting its CA unless `caFile` says otherwise.
    func curl(_ url: String, caFile: String? = nil, _ extra: [String] = []) throws -> CurlResult {
        try Curl.run(url, proxyURL: proxyURL, caFile: caFile ?? self.caFile, extra: extra, directory: directory)
    }

    /// What `/metrics` would answer now.
    func scrape() throws -> PrometheusText {
        try PrometheusText(parsing: metrics.exposition())
    }

    /// The access lines so far, as their fields (numbers as text).
    var accessLog: [[String: String]] {
        recorder.logs.filter { $0.label == "pinproxy.access" }.map(\.metadata)
    }

    /// The other log lines so far (`pinproxy`'s own logger).
    var log: [Recorder.Line] {
        recorder.logs.filter { $0.label != "pinproxy.access" }
    }

    /// Waits until the access log holds `count` lines: an exchange's line is
    /// written when it ends, which may be just after its client saw the answer.
    func waitForAccessLog(count: Int) async -> [[String: String]] {
        await pollFor { () -> [[String: String]]? in
            let lines = accessLog
            return lines.count >= count ? lines : nil
        } ?? accessLog
    }
}

/// The listener's port, or why it never listened: told once either way.
private final class ListeningPort: Sendable {
    private let promise: EventLoopPromise<Int>
    private let done = NIOLockedValueBox(false)

    init(_ promise: EventLoopPromise<Int>) { self.promise = promise }

    func succeed(_ port: Int) {
        if done.withLockedValue({ let first = !$0; $0 = true; return first }) { promise.succeed(port) }
    }

    func fail(_ error: any Error) {
        if done.withLockedValue({ let first = !$0; $0 = true; return first }) { promise.fail(error) }
    }

    var port: Int {
        get async throws { try await promise.futureResult.get() }
    }
}

/// The services' clock for a test: real time plus an offset the test moves
/// forward, so "once the window passed" takes no waiting while NIO's own
/// timers (deadlines, the pool's idle timers) still run on real time.
final class ProxyTestClock: Sendable {
    private let offset = NIOLockedValueBox(Duration.zero)

    init() {}

    func advance(by duration: Duration) { offset.withLockedValue { $0 += duration } }

    var services: ServicesClock {
        ServicesClock(
            date: { Date().addingTimeInterval(self.offset.withLockedValue { $0 } / .seconds(1)) },
            instant: { ContinuousClock.now + self.offset.withLockedValue { $0 } })
    }
}

extension UpstreamDialer {
    /// Dials through `connector` (the real dial: guard, TCP, TLS, chain and
    /// pin check), each target whose host is in `ports` sent to that port on
    /// 127.0.0.1 instead. The name the client asked for stays the SNI, the
    /// name verified and the pool key.
    static func loopback(_ ports: [String: Int], connector: UpstreamConnector) -> UpstreamDialer {
        let table = Dictionary(uniqueKeysWithValues: ports.map { ($0.key.lowercased(), $0.value) })
        @Sendable func mapped(_ plan: DialPlan) -> DialPlan {
            plan.dialling(plan.targets.map { target in
                table[target.host.lowercased()].map { HostPort(host: "127.0.0.1", port: $0) } ?? target
            })
        }
        return UpstreamDialer(
            connection: { plan, loop in connector.connect(mapped(plan), on: loop) },
            channel: { plan, loop, initializer in connector.dial(mapped(plan), on: loop, initializer: initializer) })
    }
}
