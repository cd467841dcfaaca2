import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTP2
import PinproxyPolicy
import PinproxyTLS

@testable import PinproxyServer

/// The proxy's real services over a small policy set, built once per process,
/// with an `UpstreamDialer` that makes each upstream an `EmbeddedChannel`
/// (the real HTTP client codec and `UpstreamHTTPHandler`, no TLS) on the
/// input's own event loop.
final class ProxyFuzzHarness: @unchecked Sendable {  // one fuzzing thread
    static let shared = ProxyFuzzHarness()

    static let policies = """
        hosts:
          - match: denied.test
            action: deny
          - match: intercept.test
            action: intercept
          - match: "*.wild.test"
            action: intercept
            upgrade_to_tls: true
        """

    let services: ProxyServices
    /// The upstream channels the dialer made for the current input, oldest first.
    var upstreams: [EmbeddedChannel] = []

    private init() {
        let directory = NSTemporaryDirectory() + "pinproxy-fuzz-\(getpid())"
        try? FileManager.default.createDirectory(atPath: directory + "/etc/policies", withIntermediateDirectories: true)
        try! """
            policies: policies
            default_action: deny
            limits:
              max_header_bytes: 4096
            """.write(toFile: directory + "/etc/pinproxy.yaml", atomically: true, encoding: .utf8)
        try! Self.policies.write(toFile: directory + "/etc/policies/p.yaml", atomically: true, encoding: .utf8)
        let loader = PolicyLoader(configFile: directory + "/etc/pinproxy.yaml", environment: [:], workingDirectory: directory)
        let result = loader.load()
        // Read once, never reloaded: the files go now, not left behind in
        // the temp directory by every run (libFuzzer ends the process itself).
        try? FileManager.default.removeItem(atPath: directory)
        guard let snapshot = result.snapshot else { fatalError("the fuzz policy set did not load: \(result.diagnostics)") }
        let box = UpstreamBox()
        services = try! ProxyServices(
            store: PolicyStore(loader: loader, initial: snapshot), ca: try! CertificateAuthority.create(),
            instrumentation: NoInstrumentation(),
            logger: Logger(label: "pinproxy") { _ in RenderingLogHandler() },
            accessLog: Logger(label: "pinproxy.access") { _ in RenderingLogHandler() },
            dialer: UpstreamDialer(
                connection: { plan, loop in box.harness!.makeConnection(plan, loop: loop) },
                channel: { plan, loop, initializer in box.harness!.makeChannel(loop: loop, initializer: initializer) }))
        box.harness = self
    }

    private func makeChannel(loop: any EventLoop, initializer: (any Channel) throws -> Void) -> EventLoopFuture<any Channel> {
        let channel = EmbeddedChannel(loop: loop as! EmbeddedEventLoop)
        upstreams.append(channel)
        do {
            try initializer(channel)
            channel.connect(to: try SocketAddress(ipAddress: "127.0.0.2", port: 443), promise: nil)
            return loop.makeSucceededFuture(channel)
        } catch {
            return loop.makeFailedFuture(error)
        }
    }

    private func makeConnection(_ plan: DialPlan, loop: any EventLoop) -> EventLoopFuture<UpstreamConnection> {
        // Production's plain-HTTP upstream shape (`UpstreamPipeline`).
        var built: UpstreamPipeline?
        let made = makeChannel(loop: loop) { channel in
            built = try UpstreamPipeline.configure(channel, tls: nil)
        }
        guard let pipeline = built, let handler = pipeline.http1 else {
            return made.flatMapThrowing { _ in throw ChannelError.ioOnClosedChannel }
        }
        return made.flatMap { channel in
            pipeline.ready.futureResult.map { _ in
                UpstreamConnection(channel: channel, key: plan.poolKey, handler: handler, pinEvaluation: nil, handshake: nil)
            }
        }
    }
}

private final class UpstreamBox: @unchecked Sendable {
    weak var harness: ProxyFuzzHarness?
}

/// Renders every line as a real handler would (so interpolation runs), then drops it.
struct RenderingLogHandler: LogHandler {
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
             file: String, function: String, line: UInt) {
        var text = message.description
        for (key, value) in self.metadata.merging(metadata ?? [:], uniquingKeysWith: { $1 }) { text += " \(key)=\(value)" }
        precondition(!text.isEmpty)
    }
}

/// One client connection for one input, built by production's builders
/// (`Sources/PinproxyServer/Pipelines`): the listener's pipeline, an
/// intercepted session's HTTP/1.1 layers after its TLS
/// (`HTTP1ServerPipeline`, as ALPN settles it), or one HTTP/2 stream of an
/// intercepted session (`InterceptedHTTP2Pipeline.configureStream`, fed frame
/// payloads as NIO's HTTP/2 handler would hand them on).
final class FuzzSession {
    enum Shape {
        case listener
        case intercepted
        case http2Stream
    }

    let harness = ProxyFuzzHarness.shared
    let loop = EmbeddedEventLoop()
    let client: EmbeddedChannel
    /// Everything written to the app.
    var output: [UInt8] = []
    /// Every upstream's bytes through NIO's own request decoder: the check
    /// that no app request becomes two upstream (smuggling).
    private var upstreamParsers: [ObjectIdentifier: RequestCounter] = [:]
    let shape: Shape

    convenience init(intercepted: Bool) {
        self.init(intercepted ? .intercepted : .listener)
    }

    init(_ shape: Shape) {
        self.shape = shape
        harness.upstreams = []
        client = EmbeddedChannel(loop: loop)
        client.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 50_000), promise: nil)
        let services = harness.services
        if shape == .http2Stream {
            let limits = services.store.snapshot.config.limits
            let policy = services.store.snapshot.policy(forHost: "intercept.test")!
            // No head timer on a stream, as in the product (SessionInstaller):
            // its head is whole when the stream exists.
            try! InterceptedHTTP2Pipeline.configureStream(
                client.pipeline.syncOperations, idleTimeout: Self.amount(limits.idleTimeout),
                exchange: HTTPExchangeHandler(
                    services: services, interception: RequestRouter.Interception(host: "intercept.test", port: 443, policy: policy),
                    clientAddress: "127.0.0.1:50000", headTimer: nil, limits: limits, clientProtocol: .h2))
        } else if shape == .intercepted {
            let limits = services.store.snapshot.config.limits
            let policy = services.store.snapshot.policy(forHost: "intercept.test")!
            let timer = RequestHeadTimer(headerTimeout: Self.amount(limits.headerTimeout), idleTimeout: Self.amount(limits.idleTimeout),
                                         maxHeadBytes: limits.maxHeaderBytes)
            // Production's HTTP/1.1 layers of an intercepted session (`HTTP1ServerPipeline`), after its TLS.
            try! HTTP1ServerPipeline.configure(
                client.pipeline.syncOperations, timer: timer,
                exchange: HTTPExchangeHandler(
                    services: services, interception: RequestRouter.Interception(host: "intercept.test", port: 443, policy: policy),
                    clientAddress: "127.0.0.1:50000", headTimer: timer, limits: limits),
                limits: limits)
        } else {
            try! ProxyServer.configureClient(client, services: services)
        }
        loop.run()
    }

    /// PINPROXY_FUZZ_DEBUG=1: print what the app received (to check a seed does what it says).
    static let debug = ProcessInfo.processInfo.environment["PINPROXY_FUZZ_DEBUG"] == "1"

    func clientSends(_ bytes: ArraySlice<UInt8>) {
        guard client.isActive else { return }
        _ = try? client.writeInbound(ByteBuffer(bytes: bytes))
        settle()
    }

    /// One frame payload on the HTTP/2 stream (`.http2Stream` only).
    func clientSends(_ payload: HTTP2Frame.FramePayload) {
        guard client.isActive else { return }
        _ = try? client.writeInbound(payload)
        settle()
    }

    /// Request heads each upstream has received whole, by NIO's decoder; a
    /// byte stream it cannot parse counts as a request too (something went
    /// up that is no well-framed request).
    func upstreamRequestCount() -> Int {
        var total = 0
        for upstream in harness.upstreams {
            let counter = upstreamParsers[ObjectIdentifier(upstream)] ?? RequestCounter()
            upstreamParsers[ObjectIdentifier(upstream)] = counter
            while let buffer = try? upstream.readOutbound(as: ByteBuffer.self) { counter.feed(buffer) }
            total += counter.requests + (counter.broken ? 1 : 0)
        }
        return total
    }

    /// Bytes from the newest upstream that is still open.
    func upstreamSends(_ bytes: ArraySlice<UInt8>) {
        guard let upstream = harness.upstreams.last(where: \.isActive) else { return }
        _ = try? upstream.writeInbound(ByteBuffer(bytes: bytes))
        settle()
    }

    func upstreamCloses() {
        harness.upstreams.last(where: \.isActive)?.close(promise: nil)
        settle()
    }

    /// Every upstream that has received a whole request head answers it with a small response.
    func upstreamsAnswer() {
        _ = upstreamRequestCount()
        for upstream in harness.upstreams where upstream.isActive {
            let counter = upstreamParsers[ObjectIdentifier(upstream)]!
            let answers = counter.requests - counter.answered
            counter.answered = counter.requests
            for _ in 0..<answers where upstream.isActive {
                _ = try? upstream.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"))
                settle()
            }
        }
    }

    func settle() {
        loop.run()
        while let buffer = try? client.readOutbound(as: ByteBuffer.self) { output += buffer.readableBytesView }
    }

    /// The app goes away; the pool lets go of what it held; nothing outlives the input.
    func finish() {
        if Self.debug {
            FileHandle.standardError.write(Data("--- \(harness.upstreams.count) upstream connections; to the app:\n".utf8) + Data(output) + Data("\n".utf8))
        }
        loop.advanceTime(by: DeadlineSweeper.tick)
        client.close(promise: nil)
        settle()
        harness.services.pool.closeIdle()
        for upstream in harness.upstreams { upstream.close(promise: nil) }
        settle()
        for upstream in harness.upstreams { _ = try? upstream.finish(acceptAlreadyClosed: true) }
        _ = try? client.finish(acceptAlreadyClosed: true)
        loop.run()
        harness.upstreams = []
        try? loop.syncShutdownGracefully()
    }

    /// Duration → TimeAmount (PinproxyServer's own initializer for this is
    /// ambiguous with NIO's from here).
    static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

}

/// NIO's HTTP/1 request decoder over a byte stream (what an upstream
/// received, or what the app sent): the request heads in it, and whether it
/// stopped parsing.
final class RequestCounter {
    private let channel = EmbeddedChannel()
    private(set) var requests = 0
    var answered = 0
    private(set) var broken = false

    init() {
        try! channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
    }

    func feed(_ buffer: ByteBuffer) {
        guard !broken else { return }
        do {
            try channel.writeInbound(buffer)
        } catch {
            // The requests decoded before the error in this same read were
            // delivered all the same (pinproxy's decoder forwards them too):
            // they are counted below before the counter stops.
            broken = true
        }
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) {
            if case .head = part { requests += 1 }
        }
    }

    deinit { _ = try? channel.finish(acceptAlreadyClosed: true) }
}
