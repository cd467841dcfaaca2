import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOTLS
import PinproxyPolicy
import PinproxyTLS
import Testing

@testable import PinproxyServer

/// Each pipeline builder of `Sources/PinproxyServer/Pipelines` on an
/// `EmbeddedChannel`: the handlers present after each shape, head to tail.
/// The intercepted shapes follow a real TLS handshake with an app (no ALPN,
/// or `h2` offered), so ALPN settles them as it does in production.
@Suite("Pipeline builders")
struct PipelineBuilderTests {
    typealias App = ConnectHandlerTests.App

    static let listenerCodec = ["RequestHeadTimer", "HeadPathRequestDecoder", "ResponseWriter"]

    @Test func theListenerIsTheHeadTimerTheServerCodecTheExchangeAndTheConnectHandler() throws {
        let proxy = try EmbeddedProxy()
        #expect(PipelineShapes.handlers(proxy.channel.pipeline) == Self.listenerCodec + ["HTTPExchangeHandler", "ConnectHandler"])
    }

    /// After the CONNECT's answer the listener's layers are gone, and until
    /// the handshake settles ALPN no HTTP layer is there.
    @Test func anInterceptedSessionBeforeItsHandshakeHasNoHTTPLayer() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        #expect(try ConnectHandlerTests.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        #expect(PipelineShapes.handlers(proxy.channel.pipeline)
                == ["TLSHandler", "ClientHandshakeReporter", "RequestHeadTimer", "NIOTypedApplicationProtocolNegotiationHandler"])
    }

    static func session(offering: [String]?) throws -> (EmbeddedProxy, App) {
        let proxy = try EmbeddedProxy()
        let app = try App(trusting: proxy.services.ca, serverName: "intercept.test", offering: offering)
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        #expect(try ConnectHandlerTests.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        try proxy.send(try app.connect())
        try app.interact(with: proxy)
        #expect(proxy.recorder.clientHandshakes == ["ok"], "the handshake is counted once, whichever protocol")
        return (proxy, app)
    }

    @Test func anAppWithoutALPNGetsTheHTTP1LayersBoundToTheConnectHost() throws {
        let (proxy, app) = try Self.session(offering: nil)
        defer { app.finish() }
        #expect(PipelineShapes.handlers(proxy.channel.pipeline)
                == ["TLSHandler"] + Self.listenerCodec + ["HTTPExchangeHandler"], "the reporter left with the handshake")
        let exchange = try proxy.channel.pipeline.syncOperations.handler(type: HTTPExchangeHandler.self)
        #expect(exchange.interception?.host == "intercept.test")
        #expect(exchange.interception?.port == 443)
        #expect(exchange.serverLayers?.decoders.count == 1, "its layers are known to a WebSocket splice")
    }

    @Test func anAppThatChoseH2GetsTheHTTP2LayersAndNoHTTP1Layer() throws {
        let (proxy, app) = try Self.session(offering: ["h2", "http/1.1"])
        defer { app.finish() }
        #expect(PipelineShapes.handlers(proxy.channel.pipeline)
                == ["TLSHandler", "NIOHTTP2Handler", "NIOHTTP2ServerConnectionManagementHandler", "HTTP2ConnectionEnd"],
                "the reporter left with the handshake")
    }

    /// An app stream of a session intercepting `intercept.test`, built as
    /// `InterceptedHTTP2Pipeline` builds each (an h2 stream has no head timer).
    static func interceptedStream(_ stream: EmbeddedChannel, proxy: EmbeddedProxy) throws {
        let limits = proxy.services.store.snapshot.config.limits
        let policy = try #require(proxy.services.store.snapshot.policy(forHost: "intercept.test"))
        try InterceptedHTTP2Pipeline.configureStream(
            stream.pipeline.syncOperations, idleTimeout: .seconds(5),
            exchange: HTTPExchangeHandler(services: proxy.services, interception: .init(host: "intercept.test", port: 443, policy: policy),
                                          clientAddress: "127.0.0.1:1", headTimer: nil, limits: limits, clientProtocol: .h2))
    }

    /// No HTTP/1 codec on a stream: one adapter from frame payloads to the exchange's parts.
    @Test func anInterceptedStreamIsTheFrameAdapterThenItsExchange() throws {
        let proxy = try EmbeddedProxy()
        let stream = EmbeddedChannel()
        defer { _ = try? stream.finish(acceptAlreadyClosed: true) }
        try Self.interceptedStream(stream, proxy: proxy)
        #expect(PipelineShapes.handlers(stream.pipeline)
                == ["HTTP2StreamAdapter", "HTTPExchangeHandler"])
    }

    /// The adapter hands the request's parts to its exchange itself: a
    /// handler put between the two sees none of them go by, and the exchange
    /// still answers (here 421: the stream names another host).
    @Test func anInterceptedStreamsPartsReachItsExchangeWithoutAPipelineHop() throws {
        let proxy = try EmbeddedProxy()
        let stream = EmbeddedChannel()
        defer { _ = try? stream.finish(acceptAlreadyClosed: true) }
        try Self.interceptedStream(stream, proxy: proxy)
        let between = ReadCounter()
        let adapter = try stream.pipeline.syncOperations.handler(type: HTTP2StreamAdapter.self)
        try stream.pipeline.syncOperations.addHandler(between, position: .after(adapter))
        try stream.writeInbound(HTTP2Frame.FramePayload.headers(.init(
            headers: HPACKHeaders([(":method", "GET"), (":path", "/"), (":scheme", "https"), (":authority", "elsewhere.test")]),
            endStream: true)))
        #expect(between.reads == 0)
        guard case .headers(let answer)? = try stream.readOutbound(as: HTTP2Frame.FramePayload.self) else {
            Issue.record("the exchange answered nothing")
            return
        }
        #expect(answer.headers.first(name: ":status") == "421")
    }

    /// Counts the request parts that pass it.
    final class ReadCounter: ChannelInboundHandler {
        typealias InboundIn = AppRequestPart
        var reads = 0
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            reads += 1
            context.fireChannelRead(data)
        }
    }

    // MARK: Upstream

    @Test func aPlainUpstreamIsTheHeadPathsWriterAndDecoderAndItsHandlerReadyOnceActive() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let pipeline = try UpstreamPipeline.configure(channel, tls: nil)
        #expect(PipelineShapes.handlers(channel.pipeline)
                == ["RequestWriter", "HeadPathResponseDecoder", "UpstreamHTTPHandler"])
        #expect(pipeline.http1?.layers?.handlers.count == 1)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        #expect(try pipeline.ready.futureResult.wait() == nil)
    }

    static func tlsUpstream() throws -> (EmbeddedChannel, UpstreamPipeline) {
        let channel = EmbeddedChannel()
        let context = try TLSContext(configuration: .client())
        let pipeline = try UpstreamPipeline.configure(channel, tls: TLSHandler(clientContext: context, serverName: "upstream.test"))
        return (channel, pipeline)
    }

    @Test func aTLSUpstreamWaitsForALPNWithNoHTTPLayer() throws {
        let (channel, pipeline) = try Self.tlsUpstream()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        #expect(PipelineShapes.handlers(channel.pipeline)
                == ["TLSHandler", "UpstreamHandshakeWatcher", "NIOTypedApplicationProtocolNegotiationHandler"])
        #expect(pipeline.http1 == nil && pipeline.multiplexer == nil)
    }

    /// NIO's handshake event, as `TLSHandler` fires it, settles the shape.
    @Test(arguments: [("h2", true), ("http/1.1", false)])
    func aTLSUpstreamGetsTheLayersOfTheProtocolTheServerSelected(selected: String, http2: Bool) throws {
        let (channel, pipeline) = try Self.tlsUpstream()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        channel.pipeline.fireUserInboundEventTriggered(NIOTLS.TLSUserEvent.handshakeCompleted(negotiatedProtocol: selected))
        channel.embeddedEventLoop.run()
        if http2 {
            #expect(PipelineShapes.handlers(channel.pipeline)
                    == ["TLSHandler", "UpstreamHandshakeWatcher", "NIOHTTP2Handler", "UpstreamHTTP2ConnectionHandler"])
            #expect(pipeline.multiplexer != nil && pipeline.http1 == nil)
        } else {
            #expect(PipelineShapes.handlers(channel.pipeline)
                    == ["TLSHandler", "UpstreamHandshakeWatcher", "RequestWriter", "HeadPathResponseDecoder", "UpstreamHTTPHandler"])
            #expect(pipeline.http1 != nil && pipeline.multiplexer == nil)
        }
    }

    /// One handler a stream: the adapter calls the stream's `UpstreamHTTPHandler` itself.
    @Test func anUpstreamStreamIsTheFrameAdapterAlone() throws {
        let stream = EmbeddedChannel()
        defer { _ = try? stream.finish(acceptAlreadyClosed: true) }
        _ = try UpstreamHTTP2Pipeline.configureStream(stream)
        #expect(PipelineShapes.handlers(stream.pipeline) == ["UpstreamHTTP2StreamAdapter"])
    }

    // MARK: Splices and the parent tunnel

    @Test func aSpliceIsTheIdleTimerAndTheGlueOnTheAppsSideAndTheGlueOnTheUpstreams() throws {
        let loop = EmbeddedEventLoop()
        let app = EmbeddedChannel(loop: loop)
        let upstream = EmbeddedChannel(loop: loop)
        defer { _ = try? app.finish(acceptAlreadyClosed: true); _ = try? upstream.finish(acceptAlreadyClosed: true) }
        _ = try SplicePipeline.addGlue(client: app.pipeline.syncOperations, upstream: upstream.pipeline.syncOperations,
                                       upstreamPosition: .last, idleTimeout: .seconds(1), onIdle: {})
        #expect(PipelineShapes.handlers(app.pipeline) == ["IdleStateHandler", "SpliceIdleClose", "GlueHandler"])
        #expect(PipelineShapes.handlers(upstream.pipeline) == ["GlueHandler"])
    }

    @Test func theParentTunnelIsItsConnectHandlerUntilTheParentAnswers() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let answered = channel.eventLoop.makePromise(of: Void.self)
        try ParentTunnelPipeline.configure(
            channel, parent: UpstreamProxy(host: "parent", port: 3128, credentials: nil), target: HostPort(host: "upstream.test", port: 443),
            host: "upstream.test", answered: answered)
        #expect(PipelineShapes.handlers(channel.pipeline) == ["ParentConnectHandler"])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        #expect(String(buffer: try #require(try channel.readOutbound(as: ByteBuffer.self))).hasPrefix("CONNECT upstream.test:443 HTTP/1.1\r\n"))
        try channel.writeInbound(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n"))
        try answered.futureResult.wait()
        ParentTunnelPipeline.removeConnect(channel)
        #expect(PipelineShapes.handlers(channel.pipeline).isEmpty, "nothing of the CONNECT is left for the upstream's layers")
    }
}

/// Issue 29: no pipeline is reshaped by looking handlers up by type and
/// taking them out; only the builders in `Pipelines/` remove handlers, and
/// only those they added (recorded instances, or a name they gave).
@Suite("Pipeline removals")
struct PipelineRemovalTests {
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")

    @Test func onlyThePipelineBuildersRemoveHandlers() throws {
        var offenders: [String] = []
        let files = try #require(FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil))
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("removeHandler(") {
                let relative = file.path.replacingOccurrences(of: Self.sources.path + "/", with: "")
                if !relative.hasPrefix("PinproxyServer/Pipelines/") || line.contains("type:") {
                    offenders.append("\(relative):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(offenders.isEmpty, "handlers removed outside the builders, or by type:\n\(offenders.joined(separator: "\n"))")
    }
}
