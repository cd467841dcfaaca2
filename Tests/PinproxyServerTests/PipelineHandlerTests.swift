import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyTLS
import Testing

@testable import PinproxyServer

/// The handlers the pipeline builders put in around a handshake and a
/// splice, each on `EmbeddedChannel`s: `ClientHandshakeReporter` (what
/// `ClientProtocolSwitch` left to the HTTP/1 exchange handler),
/// `UpstreamHandshakeWatcher` (what `UpstreamProtocolSwitch` and the HTTP/1
/// handler did for readiness), and `WebSocketSplicePipeline` (formerly
/// `UpgradeSplice`).
@Suite("Pipeline handlers")
struct PipelineHandlerTests {
    // MARK: ClientHandshakeReporter

    static func reporter() throws -> (EmbeddedProxy, EmbeddedChannel, ClientHandshakeReporter) {
        let proxy = try EmbeddedProxy()
        let reporter = ClientHandshakeReporter(services: proxy.services, clientAddress: "127.0.0.1:1", connectHost: "intercept.test")
        let channel = EmbeddedChannel(handler: reporter)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (proxy, channel, reporter)
    }

    @Test func aFailedHandshakeIsCountedLoggedWithItsSNIAndClosed() throws {
        let (proxy, channel, reporter) = try Self.reporter()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        reporter.clientSNI = "intercept.test"
        channel.pipeline.fireErrorCaught(TLSError.certificateRejected("unknown ca"))
        #expect(proxy.recorder.clientHandshakes == ["untrusted_ca"])
        let line = try #require(proxy.recorder.logs.first { $0.message == "client TLS handshake failed" })
        #expect(line.metadata["sni"] == "intercept.test")
        #expect(line.metadata["connect_host"] == "intercept.test")
        #expect(line.metadata["hint"] != nil)
        #expect(!channel.isActive)
    }

    @Test func aGoodHandshakeIsCountedOnceAndLaterErrorsGoToTheHTTPLayers() throws {
        let (proxy, channel, _) = try Self.reporter()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let info = try Self.handshakeInfo()
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(info))
        #expect(proxy.recorder.clientHandshakes == ["ok"])
        #expect(PipelineShapes.handlers(channel.pipeline).isEmpty, "the reporter left with the handshake, its last event")
        channel.pipeline.fireErrorCaught(TLSError.uncleanShutdown)
        #expect(throws: TLSError.self) { try channel.throwIfErrorCaught() }
        #expect(proxy.recorder.clientHandshakes == ["ok"], "an error after the handshake is no handshake result")
        #expect(channel.isActive, "the HTTP layers decide what an error after the handshake ends")
    }

    // MARK: UpstreamHandshakeWatcher

    /// A real handshake's info: an app and pinproxy's interception leg, in memory.
    static func handshakeInfo() throws -> TLSHandshakeInfo {
        let (proxy, app) = try PipelineBuilderTests.session(offering: nil)
        defer { app.finish() }
        // The proxy finishes its channel when it goes, which may be right
        // after its last use: keep it until the info has been read.
        return try withExtendedLifetime(proxy) {
            try #require(try proxy.channel.pipeline.syncOperations.handler(type: TLSHandler.self).handshakeInfo)
        }
    }

    @Test func theWatcherMakesTheConnectionReadyWithTheHandshake() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let ready = channel.eventLoop.makePromise(of: TLSHandshakeInfo?.self)
        try channel.pipeline.syncOperations.addHandler(UpstreamHandshakeWatcher(ready: ready))
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(try Self.handshakeInfo()))
        #expect(try ready.futureResult.wait()?.version != nil)
        #expect(PipelineShapes.handlers(channel.pipeline).isEmpty, "the watcher left with the handshake, its last event")
    }

    @Test func theWatcherFailsReadinessWithTheHandshakesErrorAndCloses() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let ready = channel.eventLoop.makePromise(of: TLSHandshakeInfo?.self)
        try channel.pipeline.syncOperations.addHandler(UpstreamHandshakeWatcher(ready: ready))
        channel.pipeline.fireErrorCaught(TLSError.verifyFailed("pin mismatch"))
        #expect(throws: TLSError.verifyFailed("pin mismatch")) { try ready.futureResult.wait() }
        #expect(!channel.isActive, "no HTTP layer yet to end the connection: the watcher does")
    }

    @Test func theWatcherFailsReadinessWhenTheConnectionEndsFirst() throws {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let ready = channel.eventLoop.makePromise(of: TLSHandshakeInfo?.self)
        try channel.pipeline.syncOperations.addHandler(UpstreamHandshakeWatcher(ready: ready))
        _ = try channel.finish(acceptAlreadyClosed: true)
        #expect(throws: ChannelError.self) { try ready.futureResult.wait() }
    }

    // MARK: The upstream's HTTP/1.1 layers

    /// The response decoder is told of each request by the connection that
    /// writes it (`SentRequests`), not by watching the writes: the answer to
    /// a HEAD is read without the body its Content-Length names, so the next
    /// answer is read as the next answer; no write passes through the decoder.
    @Test func theResponseDecoderIsToldOfEachRequestTheConnectionWrites() throws {
        let upstreamChannel = EmbeddedChannel()
        defer { _ = try? upstreamChannel.finish(acceptAlreadyClosed: true) }
        let (upstream, exchangeSide) = try Self.plainUpstream(upstreamChannel, host: "api.test")
        for method in [HTTPMethod.HEAD, .GET] {
            upstream.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: "/")))
            upstream.write(.end(nil))
        }
        upstream.flush()
        #expect(String(buffer: try #require(try upstreamChannel.readOutbound(as: ByteBuffer.self))).hasPrefix("HEAD / HTTP/1.1\r\n"))
        try upstreamChannel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" +
                                                            "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"))
        #expect(exchangeSide.heads == [200, 201], "the HEAD's answer had no body: the GET's answer followed it")
        #expect(exchangeSide.ends == 2)
        // A third answer, to no request the connection wrote, is refused:
        // the connection ends.
        _ = try? upstreamChannel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
        #expect(exchangeSide.heads == [200, 201])
        #expect(!upstreamChannel.isActive)
    }

    // MARK: WebSocketSplicePipeline

    /// The listener's exchange, an upstream HTTP/1.1 connection on the same
    /// loop, spliced after a `101`: only the glue is left on the app's side,
    /// the glue and the pool's handler on the upstream's, and bytes cross
    /// (the upstream's first frame held by its decoder too).
    @Test func aWebSocketSpliceLeavesOnlyTheGlueAndCarriesBytesBothWays() throws {
        let proxy = try EmbeddedProxy()
        let loop = proxy.channel.embeddedEventLoop
        let upstreamChannel = EmbeddedChannel(loop: loop)
        defer { _ = try? upstreamChannel.finish(acceptAlreadyClosed: true) }
        let (upstream, exchangeSide) = try Self.plainUpstream(upstreamChannel, host: "ws.test")
        // The upgrade request went up as the exchange sends it (the response
        // decoder reads answers to the requests the connection told it of).
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/socket")
        head.headers.add(name: "Upgrade", value: "websocket")
        head.headers.add(name: "Connection", value: "Upgrade")
        upstream.write(.head(head))
        upstream.write(.end(nil))
        upstream.flush()
        while try upstreamChannel.readOutbound(as: ByteBuffer.self) != nil {}
        // The upstream's 101 and, in the same read, its first WebSocket bytes.
        try upstreamChannel.writeInbound(ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nframe-1"))

        let sync = proxy.channel.pipeline.syncOperations
        let exchange = try sync.handler(type: HTTPExchangeHandler.self)
        var closed: (up: Int, down: Int)?
        try WebSocketSplicePipeline.install(
            client: try sync.context(handler: exchange), clientLayers: try #require(exchange.serverLayers), upstream: upstream,
            idleTimeout: .zero, onIdle: {}, onClose: { closed = ($0, $1) })
        loop.run()
        #expect(exchangeSide.heads == [101], "the 101 went to the exchange, the bytes after it did not")
        #expect(PipelineShapes.handlers(proxy.channel.pipeline) == ["GlueHandler"])
        #expect(PipelineShapes.handlers(upstreamChannel.pipeline) == ["GlueHandler", "UpstreamHTTPHandler"])
        #expect(try proxy.output() == "frame-1", "what the upstream's decoder held goes on to the app")

        try proxy.send("from-app")
        #expect(String(buffer: try #require(try upstreamChannel.readOutbound(as: ByteBuffer.self))) == "from-app")
        try upstreamChannel.writeInbound(ByteBuffer(string: "frame-2"))
        #expect(try proxy.output() == "frame-2")
        try proxy.channel.close().wait()
        loop.run()
        #expect(closed?.up == 8 && closed?.down == 14)
        #expect(!upstreamChannel.isActive, "the splice closes both sides")
    }

    /// The exchange's side of an upstream connection: the heads it got.
    /// A plain HTTP/1.1 upstream connection on `channel`, connected, as the
    /// pool lends it, and what reaches its exchange.
    static func plainUpstream(_ channel: EmbeddedChannel, host: String) throws -> (UpstreamConnection, Receiver) {
        let pipeline = try UpstreamPipeline.configure(channel, tls: nil)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        let upstream = UpstreamConnection(channel: channel, key: .init(digest: "d", host: host, port: 80, tls: false),
                                          handler: try #require(pipeline.http1), pinEvaluation: nil, handshake: nil)
        let exchangeSide = Receiver()
        upstream.receiver = exchangeSide
        return (upstream, exchangeSide)
    }

    final class Receiver: UpstreamResponseReceiver {
        var heads: [UInt] = []
        var ends = 0
        func upstreamReceived(_ part: UpstreamResponsePart) {
            switch part {
            case .head(let head): heads.append(UInt(head.statusCode))
            case .body: break
            case .end: ends += 1
            }
        }
        func upstreamReadComplete() {}
        func upstreamWritabilityChanged() {}
        func upstreamClosed(_ error: (any Error)?) {}
    }
}
