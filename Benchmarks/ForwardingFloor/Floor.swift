// The floor under pinproxy's request path, for bench/run ("floor").
//
// An intercepting forwarder built from exactly the layers pinproxy stacks on
// both legs (its TLSHandler, NIO's HTTP/1 codecs with their outbound header
// validators) that forwards each HTTP part as it comes and does nothing else:
// no policy, no refusal rules, no pins, no access line, no metrics, no
// deadlines; its pool is a list of idle upstream connections (FloorPool.swift),
// so that a new app connection does not dial, as in pinproxy. What a
// keep-alive request costs here is what it costs in the layers pinproxy is
// made of; pinproxy's CPU per request minus this one is what its own work
// adds. It is a measuring stick, not a proxy: it trusts every app, answers
// every CONNECT and is never built into pinproxy.
//
//     pinproxy-floor --port N --ca-out FILE --upstream-ca FILE   (--help)
//
// It listens on 127.0.0.1:N with one event loop (as bench/run's `pinproxy`
// path; `--loops 0` gives it one per core, as pinproxy's shipped default and
// bench/run's `floor-auto`), writes the CA its leaves are minted from to FILE, and verifies
// upstreams against --upstream-ca. SIGTERM or SIGINT stops it. An app that
// chooses `h2` in ALPN (as pinproxy offers it) gets the HTTP/2 path of
// FloorHTTP2.swift (with --h2-frames, FloorHTTP2Frames.swift: no child
// channel a stream, on both legs or, --h2-app-frames and
// --h2-upstream-frames, on one). With --splice, an HTTP/1.1 app's bytes are spliced to
// the upstream with no HTTP layer (FloorSplice.swift: below the floor); with
// --raw-heads, spliced but cut at each head, which is copied on without its
// `Connection` field (FloorRawHeads.swift: the least an HTTP/1 head path does).
import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOTLS
import PinproxyHTTP1
import PinproxyHTTP1NIO
import PinproxyTLS

@main
struct Floor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinproxy-floor",
        abstract: "The layers pinproxy is built from, forwarding and nothing else (bench/run's \"floor\").")

    @Option(help: "The loopback port to listen on.")
    var port: Int

    @Option(help: "Where to write the CA the app-side leaves are minted from.")
    var caOut: String

    @Option(help: "The CA file upstream certificates are verified against.")
    var upstreamCA: String

    @Option(help: "Event loops: 1, as bench/run's `pinproxy` path, or 0 for one per core, as pinproxy's shipped default (bench/run's `floor-auto`).")
    var loops = 1

    @Flag(help: "Splice an HTTP/1.1 app's bytes to its own upstream connection, with no HTTP layer (FloorSplice.swift).")
    var splice = false

    @Flag(help: "As --splice, but cut at each head and copy it on without its Connection field (FloorRawHeads.swift).")
    var rawHeads = false

    @Flag(help: "As --raw-heads, but each head read by pinproxy's HeadParser and written from its spans (FloorRawHeads.swift).")
    var parsedHeads = false

    @Flag(help: "The floor with pinproxy's HeadPathDecoder in place of NIO's HTTP/1 decoders on both legs (NIO's encoders and parts kept).")
    var headPathDecoders = false

    @Flag(help: "The floor with NIO's codec for requests only: each response head read by pinproxy's HeadParser and written from its spans, its body passed on as bytes (--parsed-heads for one direction).")
    var parsedResponses = false

    @Flag(help: "The floor with pinproxy's RequestWriter and ResponseWriter in place of NIO's HTTP/1 encoders and outbound validators on both legs (NIO's decoders and parts kept).")
    var headPathWriters = false

    @Flag(help: "An app that chooses h2 gets NIO's HTTP/2 handler on both legs with no stream multiplexer: frames handled on the connection, no child channel a stream (FloorHTTP2Frames.swift).")
    var h2Frames = false

    @Flag(help: "As --h2-frames on the app's leg only (the upstream's streams child channels).")
    var h2AppFrames = false

    @Flag(help: "As --h2-frames on the upstream's leg only (the app's streams child channels).")
    var h2UpstreamFrames = false

    func run() throws {
        let ca = try CertificateAuthority.create(commonName: "pinproxy-floor CA")
        try ca.certificate.pemString.write(toFile: caOut, atomically: true, encoding: .utf8)
        var interception = TLSConfiguration.server(minimumVersion: .v1_2)
        interception.applicationProtocols = ["h2", "http/1.1"]  // as pinproxy's interception context
        var upstreamH2 = TLSConfiguration.client(minimumVersion: .v1_3, trustRoots: .file(upstreamCA))
        upstreamH2.applicationProtocols = ["h2"]
        let group = MultiThreadedEventLoopGroup(numberOfThreads: loops > 0 ? loops : System.coreCount)
        let idle = IdleUpstreamsByLoop(try group.makeIterator().map { loop in
            try loop.submit { NIOLoopBound(IdleUpstreams(), eventLoop: loop) }.wait()
        })
        let contexts = Contexts(
            interception: try TLSContext(configuration: interception),
            upstream: try TLSContext(configuration: .client(minimumVersion: .v1_3, trustRoots: .file(upstreamCA))),
            upstreamH2: try TLSContext(configuration: upstreamH2),
            ca: ca,
            idle: idle,
            h2Frames: H2Frames(app: h2Frames || h2AppFrames, upstream: h2Frames || h2UpstreamFrames),
            http1: parsedResponses ? .parsedResponses : headPathWriters ? .headPathWriters : headPathDecoders ? .headPathDecoders : parsedHeads ? .parsedHeads : rawHeads ? .rawHeads : splice ? .splice : .codec)

        let server = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                    try sync.addHandler(ConnectAnswer(contexts: contexts))
                }
            }
            .bind(host: "127.0.0.1", port: port).wait()

        let stop = DispatchSemaphore(value: 0)
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig)
            source.setEventHandler { stop.signal() }
            source.resume()
            sources.append(source)
        }
        stop.wait()
        try? server.close().wait()
        try? group.syncShutdownGracefully()
    }
}

struct Contexts: Sendable {
    let interception: TLSContext
    let upstream: TLSContext
    /// Offers only `h2`: the h2 path's upstream.
    let upstreamH2: TLSContext
    let ca: CertificateAuthority
    /// HTTP/1.1 upstream connections left idle by app connections that
    /// closed, a pool per event loop.
    let idle: IdleUpstreamsByLoop
    /// `--h2-frames` and its halves: which legs of an h2 app's streams have
    /// no child channels (`FloorHTTP2Frames`).
    let h2Frames: H2Frames
    /// What an HTTP/1.1 app's bytes go through.
    let http1: HTTP1Path
}

enum HTTP1Path {
    /// NIO's codecs on both legs (`Forwarder`): the floor.
    case codec
    /// `--splice`: no HTTP layer (`SpliceForwarder`).
    case splice
    /// `--raw-heads`: spliced, each head copied on without `Connection` (`RawHeads`).
    case rawHeads
    /// `--parsed-heads`: as `rawHeads`, each head read by `HeadParser` first.
    case parsedHeads
    /// `--head-path-decoders`: as `codec`, with `HeadPathDecoder` in place
    /// of NIO's decoders.
    case headPathDecoders
    /// `--head-path-writers`: as `codec`, with `RequestWriter` and
    /// `ResponseWriter` in place of NIO's encoders and outbound validators.
    case headPathWriters
    /// `--parsed-responses`: requests as `codec`, responses as `parsedHeads`.
    case parsedResponses

    /// Whether parts are forwarded (`Forwarder`), or bytes (`SpliceForwarder`).
    var forwardsParts: Bool {
        switch self {
        case .codec, .headPathDecoders, .headPathWriters, .parsedResponses: return true
        case .splice, .rawHeads, .parsedHeads: return false
        }
    }

    /// What one direction's bytes go through: nil, spliced as they are.
    func heads(_ kind: HeadParser.Kind) -> RawHeads? {
        switch self {
        case .codec, .splice, .headPathDecoders, .headPathWriters: return nil
        case .rawHeads: return RawHeads()
        case .parsedHeads: return RawHeads(parsing: kind)
        case .parsedResponses: return kind == .response ? RawHeads(parsing: kind) : nil
        }
    }

    /// The app's leg's HTTP/1 layers: NIO's server codec, its encoder and
    /// the head path's decoder, or its decoder and the head path's writer
    /// (returned: the forwarder tells it each request's method).
    func addServerCodec(_ sync: ChannelPipeline.SynchronousOperations) throws -> ResponseWriter? {
        switch self {
        case .headPathDecoders:
            try sync.addHandler(HTTPResponseEncoder(), position: .last)
            try sync.addHandler(ByteToMessageHandler(FloorRequestHeadPathDecoder(decoder: HeadPathDecoder(maxFieldBytes: 65_536, maxFieldCount: 256))), position: .last)
            return nil
        case .parsedResponses:
            // The responses go to the app as bytes: no encoder.
            try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder()), position: .last)
            return nil
        case .headPathWriters:
            let writer = ResponseWriter()
            try sync.addHandlers([ByteToMessageHandler(HTTPRequestDecoder()), writer], position: .last)
            return writer
        case .codec, .splice, .rawHeads, .parsedHeads:
            try sync.configureHTTPServerPipeline(position: .last, withPipeliningAssistance: false, withErrorHandling: false)
            return nil
        }
    }

    /// An upstream connection's HTTP/1 layers, likewise.
    func addClientCodec(_ sync: ChannelPipeline.SynchronousOperations) throws {
        switch self {
        case .headPathDecoders:
            try sync.addHandler(HTTPRequestEncoder())
            try sync.addHandler(ByteToMessageHandler(FloorResponseHeadPathDecoder(decoder: HeadPathDecoder(maxFieldBytes: 65_536, maxFieldCount: 256))))
        case .headPathWriters:
            try sync.addHandlers([RequestWriter(), ByteToMessageHandler(HTTPResponseDecoder())])
        case .parsedResponses:
            // NIO's request encoder and validator; responses are read as bytes.
            try sync.addHandlers([HTTPRequestEncoder(), NIOHTTPRequestHeadersValidator()])
        case .codec, .splice, .rawHeads, .parsedHeads:
            try sync.addHTTPClientHandlers()
        }
    }
}

/// Answers a CONNECT with 200, then swaps the listener's HTTP layers for TLS
/// (a leaf for the CONNECT host) and, once ALPN settles, HTTP/1.1 with a
/// `Forwarder` on top or HTTP/2 (`FloorHTTP2`).
final class ConnectAnswer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let contexts: Contexts
    private var target: (host: String, port: Int)?

    init(contexts: Contexts) {
        self.contexts = contexts
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let parts = head.uri.split(separator: ":")
            guard head.method == .CONNECT, parts.count == 2, let port = Int(parts[1]) else {
                context.close(promise: nil)
                return
            }
            target = (String(parts[0]), port)
        case .body:
            break
        case .end:
            guard let target else { return }
            let head = HTTPResponseHead(version: .http1_1, status: .ok)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
                guard case .success = result else { return context.close(promise: nil) }
                do {
                    try self.intercept(target, context: context)
                } catch {
                    context.close(promise: nil)
                }
            }
        }
    }

    private func intercept(_ target: (host: String, port: Int), context: ChannelHandlerContext) throws {
        let sync = context.pipeline.syncOperations
        let leaf = try contexts.ca.leaf(for: target.host)
        let tls = try TLSHandler(serverContext: contexts.interception) { _, _ in .ready(leaf) }
        try sync.addHandler(tls, position: .last)
        let contexts = self.contexts
        try sync.addHandler(NIOTypedApplicationProtocolNegotiationHandler<Void> { result, channel in
            channel.eventLoop.makeCompletedFuture {
                if case .negotiated("h2") = result, contexts.h2Frames.app {
                    try FloorHTTP2Frames.configure(channel, target: target, contexts: contexts)
                } else if case .negotiated("h2") = result {
                    try FloorHTTP2.configure(channel, target: target, contexts: contexts)
                } else if !contexts.http1.forwardsParts {
                    try channel.pipeline.syncOperations.addHandler(SpliceForwarder(target: target, contexts: contexts), position: .last)
                } else {
                    let sync = channel.pipeline.syncOperations
                    let writer = try contexts.http1.addServerCodec(sync)
                    try sync.addHandler(Forwarder(target: target, contexts: contexts, writer: writer), position: .last)
                }
            }
        }, position: .last)
        // As pinproxy's SessionInstaller: the handlers taking HTTP parts first, so
        // the decoder hands any bytes past the CONNECT head to the new layers.
        _ = sync.removeHandler(context: context)
        _ = sync.removeHandler(try sync.handler(type: NIOHTTPResponseHeadersValidator.self))
        _ = sync.removeHandler(try sync.handler(type: HTTPResponseEncoder.self))
        _ = sync.removeHandler(try sync.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self))
    }
}

/// The app's side: each request part goes to the upstream as it comes; the
/// upstream is taken from the idle ones or dialled at the first request, kept
/// for the connection, and left idle when the app closes between requests.
final class Forwarder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let target: (host: String, port: Int)
    private let contexts: Contexts
    private var upstream = UpstreamLeg<HTTPClientRequestPart>.none
    /// Requests sent whole; `Backward` counts the responses that ended.
    private var requestsEnded = 0
    /// The upstream's reads were paused once (it is not pooled then: it may
    /// still be paused, and setting it again would cost every pooled one).
    private var paused = false
    /// `--head-path-writers`: the writer told each request's method.
    private let writer: ResponseWriter?

    init(target: (host: String, port: Int), contexts: Contexts, writer: ResponseWriter?) {
        self.target = target
        self.contexts = contexts
        self.writer = writer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part: HTTPClientRequestPart
        switch unwrapInboundIn(data) {
        case .head(var head):
            writer?.requestArrived(head.method)
            // Hop-by-hop, as in any proxy: an app's `Connection: close` ends its
            // own connection, not the upstream one the next app connection takes.
            if head.headers.contains(name: "connection") { head.headers.remove(name: "connection") }
            part = .head(head)
        case .body(let bytes): part = .body(.byteBuffer(bytes))
        case .end(let trailers): part = .end(trailers)
        }
        if case .end = part { requestsEnded += 1 }
        if case .none = upstream, let channel = contexts.idle.on(context.eventLoop).take(IdleUpstreams.key(target)),
           let backward = try? channel.pipeline.syncOperations.handler(type: Backward.self) {
            backward.app = context
            upstream = .ready(channel)
        }
        switch upstream {
        case .none, .dialling:
            if upstream.hold(part) { dial(context: context) }
        case .ready(let channel):
            if case .end = part {
                channel.writeAndFlush(part, promise: nil)
            } else {
                channel.write(part, promise: nil)
            }
        case .closed:
            break
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // The app reads slower than the upstream sends (1 MiB bodies): the
        // upstream waits rather than the response piling up here.
        if case .ready(let channel) = upstream {
            paused = paused || !context.channel.isWritable
            channel.setOption(.autoRead, value: context.channel.isWritable).whenFailure { _ in }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .ready(let channel) = upstream {
            if let backward = try? channel.pipeline.syncOperations.handler(type: Backward.self),
               channel.isActive, !paused, backward.keepAlive, backward.responsesEnded == requestsEnded {
                // Between requests: the next app connection to the target takes it.
                backward.app = nil
                backward.responsesEnded = 0
                contexts.idle.on(context.eventLoop).put(channel, for: IdleUpstreams.key(target))
            } else {
                channel.close(promise: nil)
            }
        }
        upstream = .closed
        context.fireChannelInactive()
    }

    private func dial(context: ChannelHandlerContext) {
        let app = NIOLoopBound(context, eventLoop: context.eventLoop)
        let http1 = contexts.http1
        FloorDial.connect(target, tls: contexts.upstream, on: context.eventLoop) { sync in
            try http1.addClientCodec(sync)
            if let heads = http1.heads(.response) {
                try sync.addHandler(SpliceBackward(app: app.value, heads: heads))  // --parsed-responses
            } else {
                try sync.addHandler(Backward(app: app.value))
            }
        }.assumeIsolated().whenComplete { result in
            self.upstream.dialled(result, app: context)
        }
    }
}

/// The upstream's side: each response part goes back to the app as it comes.
final class Backward: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    /// The app connection this upstream serves; nil while it idles in the pool.
    var app: ChannelHandlerContext?
    /// Responses that ended, for `Forwarder` to tell whether one is in flight.
    var responsesEnded = 0
    /// The last response's head did not say the upstream closes.
    var keepAlive = true

    init(app: ChannelHandlerContext) {
        self.app = app
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part: HTTPServerResponsePart
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = head.isKeepAlive
            part = .head(head)
        case .body(let bytes): part = .body(.byteBuffer(bytes))
        case .end(let trailers):
            part = .end(trailers)
            responsesEnded += 1
        }
        app?.write(NIOAny(part), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        app?.flush()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        app?.close(promise: nil)
        context.fireChannelInactive()
    }
}
