import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
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
        let ready = loop.makePromise(of: TLSHandshakeInfo?.self)
        let handler = UpstreamHTTPHandler(ready: ready, usesTLS: false)
        return makeChannel(loop: loop) { channel in
            // As UpstreamConnector sets the codec up: framing headers are the exchange's.
            var encoder = HTTPRequestEncoder.Configuration()
            encoder.automaticallySetFramingHeaders = false
            try channel.pipeline.syncOperations.addHTTPClientHandlers(encoderConfiguration: encoder)
            try channel.pipeline.syncOperations.addHandler(handler)
        }.flatMap { channel in
            ready.futureResult.map { _ in
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

/// One client connection for one input: the listener's pipeline, or an
/// intercepted session's after its TLS layer (as `SessionInstaller.intercept`
/// builds it, without the `TLSHandler`).
final class FuzzSession {
    let harness = ProxyFuzzHarness.shared
    let loop = EmbeddedEventLoop()
    let client: EmbeddedChannel
    /// Everything written to the app.
    var output: [UInt8] = []
    private var pending: [ObjectIdentifier: [UInt8]] = [:]

    init(intercepted: Bool) {
        harness.upstreams = []
        client = EmbeddedChannel(loop: loop)
        client.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 50_000), promise: nil)
        let services = harness.services
        if intercepted {
            let limits = services.store.snapshot.config.limits
            let policy = services.store.snapshot.policy(forHost: "intercept.test")!
            let timer = RequestHeadTimer(headerTimeout: Self.amount(limits.headerTimeout), idleTimeout: Self.amount(limits.idleTimeout),
                                         maxHeadBytes: limits.maxHeaderBytes)
            let sync = client.pipeline.syncOperations
            try! sync.addHandler(timer)
            try! sync.configureHTTPServerPipeline(
                position: .last, withPipeliningAssistance: false, withServerUpgrade: nil, withErrorHandling: false,
                withOutboundHeaderValidation: true, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: ProxyServices.decoderLimits(limits))
            try! sync.addHandler(HTTPExchangeHandler(
                services: services, interception: RequestRouter.Interception(host: "intercept.test", port: 443, policy: policy),
                clientAddress: "127.0.0.1:50000", headTimer: timer, limits: limits))
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
        for upstream in harness.upstreams where upstream.isActive {
            var seen = pending[ObjectIdentifier(upstream), default: []]
            while let buffer = try? upstream.readOutbound(as: ByteBuffer.self) { seen += buffer.readableBytesView }
            var answers = 0
            while let end = Self.headEnd(seen) {
                seen.removeFirst(end)
                answers += 1
            }
            pending[ObjectIdentifier(upstream)] = seen
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

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }
}
