// The floor's HTTP/2 path, for bench/run's h2 case: what pinproxy cannot
// avoid for one h2 stream. The app's TLS and swift-nio-http2's server with a
// child channel per stream; one upstream h2 connection per app connection
// (pinproxy pools one for many), dialled at the first stream, with a child
// channel per stream too; each stream's frame payloads forwarded as they come,
// unchanged both ways (the same `:authority` goes to the same upstream). No
// HTTP/1 view, no header conversion, no policy, pins, access line, metrics
// or deadlines.
import NIOCore
import NIOHTTP2

enum FloorHTTP2 {
    /// NIO's HTTP/2 server on an app connection whose handshake chose `h2`;
    /// its upstream streams are child channels too, or with
    /// `--h2-upstream-frames` frames on the upstream connection (`FrameUpstream`).
    static func configure(_ channel: any Channel, target: (host: String, port: Int), contexts: Contexts) throws {
        let upstream: any H2UpstreamOpener = contexts.h2Frames.upstream
            ? FrameUpstream(target: target, contexts: contexts, loop: channel.eventLoop)
            : UpstreamH2Connection(target: target, contexts: contexts, loop: channel.eventLoop)
        let http2 = NIOHTTP2Handler(
            mode: .server, eventLoop: channel.eventLoop, connectionConfiguration: .init(), streamConfiguration: .init()
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(AppStream(upstream: upstream))
            }
        }
        try channel.pipeline.syncOperations.addHandler(http2)
        channel.closeFuture.whenComplete { _ in upstream.close() }
    }
}

/// An app stream's end of the forwarding, whichever way its leg is built:
/// a child channel's handler (`AppStream`) or a stream of the app
/// connection's frames (`BridgedStream`).
protocol H2AppEnd: AnyObject, Sendable {
    /// A payload from the upstream stream.
    func received(_ payload: HTTP2Frame.FramePayload)
    func flush()
    /// Its flush is its app connection's, the same for every stream on it
    /// (a stream of a frames app connection), not a channel's own.
    var flushesConnection: Bool { get }
    /// The upstream stream was reset or lost.
    func reset()
}

/// Where an app stream's payloads go: a child channel of the upstream
/// connection, or a stream ID on it (`FrameUpstream`).
enum H2UpstreamEnd {
    case channel(any Channel)
    case frames(FrameUpstream, HTTP2StreamID)

    func write(_ payload: HTTP2Frame.FramePayload) {
        switch self {
        case .channel(let channel): channel.write(payload, promise: nil)
        case .frames(let upstream, let id): upstream.write(HTTP2Frame(streamID: id, payload: payload))
        }
    }

    func flush() {
        switch self {
        case .channel(let channel): channel.flush()
        case .frames(let upstream, _): upstream.flush()
        }
    }

    func reset() {
        switch self {
        case .channel(let channel): channel.close(promise: nil)
        case .frames(let upstream, let id): upstream.reset(id)
        }
    }
}

/// An app connection's one upstream h2 connection, as it opens streams.
protocol H2UpstreamOpener: AnyObject, Sendable {
    /// A new upstream stream whose payloads go to `app`; nil if the upstream is gone.
    func openStream(for app: any H2AppEnd, then: @escaping (H2UpstreamEnd?) -> Void)
    func close()
}

/// The app connection's one upstream h2 connection, dialled at its first
/// stream; streams opened before it is up wait for it. Confined to the loop.
final class UpstreamH2Connection: H2UpstreamOpener, @unchecked Sendable {
    private enum State {
        case idle
        /// Streams waiting for the dial: each asks again once it settles.
        case dialling([() -> Void])
        case ready(any Channel, NIOHTTP2Handler.StreamMultiplexer)
        case closed
    }

    private let target: (host: String, port: Int)
    private let contexts: Contexts
    private let loop: any EventLoop
    private var state = State.idle

    init(target: (host: String, port: Int), contexts: Contexts, loop: any EventLoop) {
        self.target = target
        self.contexts = contexts
        self.loop = loop
    }

    func openStream(for app: any H2AppEnd, then: @escaping (H2UpstreamEnd?) -> Void) {
        switch state {
        case .idle:
            state = .dialling([])
            dial()
            openStream(for: app, then: then)
        case .dialling(var waiting):
            waiting.append { self.openStream(for: app, then: then) }
            state = .dialling(waiting)
        case .ready(_, let multiplexer):
            let opened = loop.makePromise(of: (any Channel).self)
            multiplexer.createStreamChannel(promise: opened) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(UpstreamStream(app: app))
                }
            }
            opened.futureResult.assumeIsolated().whenComplete { result in then((try? result.get()).map { .channel($0) }) }
        case .closed:
            then(nil)
        }
    }

    func close() {
        if case .ready(let channel, _) = state { channel.close(promise: nil) }
        failWaiting()
    }

    private func failWaiting() {
        let waiting: [() -> Void]
        if case .dialling(let list) = state { waiting = list } else { waiting = [] }
        state = .closed
        for resume in waiting { resume() }
    }

    private func dial() {
        FloorDial.connect(target, tls: contexts.upstreamH2, on: loop) { sync in
            let http2 = NIOHTTP2Handler(
                mode: .client, eventLoop: sync.eventLoop, connectionConfiguration: .init(), streamConfiguration: .init()
            ) { stream in
                stream.close(promise: nil)  // no push
                return stream.eventLoop.makeSucceededVoidFuture()
            }
            try sync.addHandler(http2)
        }.assumeIsolated().whenComplete { result in
            guard case .dialling(let waiting) = self.state else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            switch result {
            case .failure:
                self.failWaiting()
            case .success(let channel):
                guard let multiplexer = try? channel.pipeline.syncOperations.handler(type: NIOHTTP2Handler.self).syncMultiplexer() else {
                    channel.close(promise: nil)
                    return self.failWaiting()
                }
                self.state = .ready(channel, multiplexer)
                for resume in waiting { resume() }
            }
        }
    }
}

/// One app stream: its frames go to its upstream stream as they come.
final class AppStream: ChannelInboundHandler, H2AppEnd, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let upstream: any H2UpstreamOpener
    private var peer: H2UpstreamEnd?
    private var pending: [HTTP2Frame.FramePayload] = []
    private var context: ChannelHandlerContext?

    init(upstream: any H2UpstreamOpener) {
        self.upstream = upstream
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        upstream.openStream(for: self) { stream in
            guard let stream else { return context.close(promise: nil) }
            self.peer = stream
            for payload in self.pending { stream.write(payload) }
            self.pending = []
            stream.flush()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let payload = unwrapInboundIn(data)
        if let peer { peer.write(payload) } else { pending.append(payload) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        peer?.flush()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer?.reset()
        self.context = nil
        context.fireChannelInactive()
    }

    /// From the upstream stream.
    func received(_ payload: HTTP2Frame.FramePayload) {
        context?.write(wrapOutboundOut(payload), promise: nil)
    }

    func flush() {
        context?.flush()
    }

    var flushesConnection: Bool { false }

    func reset() {
        context?.close(promise: nil)
    }
}

/// One upstream stream: its frames go back to the app stream as they come.
final class UpstreamStream: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload

    private let app: any H2AppEnd
    /// The upstream ended its response: the app stream closes by itself once it has sent it.
    private var ended = false

    init(app: any H2AppEnd) {
        self.app = app
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let payload = unwrapInboundIn(data)
        switch payload {
        case .headers(let headers): ended = ended || headers.endStream
        case .data(let data): ended = ended || data.endStream
        default: break
        }
        app.received(payload)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !ended { app.reset() }  // RST_STREAM or a lost connection: the app's stream ends too
        context.fireChannelInactive()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        app.flush()
        context.fireChannelReadComplete()
    }
}
