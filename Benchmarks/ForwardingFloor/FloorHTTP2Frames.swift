// The floor's HTTP/2 path without child channels, for bench/run's
// `floor-h2frames` (both legs), `floor-h2app` (`--h2-app-frames`, the app's
// leg only) and `floor-h2up` (`--h2-upstream-frames`, the upstream's only).
// swift-nio-http2's connection handler on the leg as FloorHTTP2.swift has
// it, but with no stream multiplexer: its frames are read and written on the
// connection's own channel and each stream is an ID. No channel, pipeline,
// handler context or promise a stream; what NIO's stream channels did
// besides that is done here and nowhere else: the stream IDs, and giving
// back the flow-control window a peer's DATA took once it has been passed
// on. NIO's handler still checks every frame, header block and stream state
// as before. The measurement this exists for is the floor's h2 against
// these: what a stream's child channels cost on each leg, the part of an h2
// stream's price that is the multiplexer's and not HTTP/2's.
import NIOCore
import NIOHTTP2

/// Which legs handle their streams as frames on the connection.
struct H2Frames {
    var app = false
    var upstream = false
}

enum FloorHTTP2Frames {
    /// NIO's HTTP/2 server on an app connection whose handshake chose `h2`,
    /// its streams handled as frames on the connection (`FrameApp`).
    static func configure(_ channel: any Channel, target: (host: String, port: Int), contexts: Contexts) throws {
        let upstream: any H2UpstreamOpener = contexts.h2Frames.upstream
            ? FrameUpstream(target: target, contexts: contexts, loop: channel.eventLoop)
            : UpstreamH2Connection(target: target, contexts: contexts, loop: channel.eventLoop)
        let app = FrameApp(upstream: upstream)
        try channel.pipeline.syncOperations.addHandlers([
            NIOHTTP2Handler(mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()), ConnectionFrames(app),
        ])
    }
}

// MARK: the app's leg as frames

/// An app connection's streams, each an ID mapped to its upstream stream.
/// Confined to the connection's loop.
final class FrameApp: FrameLeg {
    private enum Leg {
        /// Payloads for an upstream stream still being opened.
        case opening([HTTP2Frame.FramePayload], BridgedStream)
        case open(H2UpstreamEnd, BridgedStream)
    }

    private let upstream: any H2UpstreamOpener
    var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Leg] = [:]
    /// Upstream ends written in this read, flushed at its end: each child
    /// channel, and the frames connection once (every `.frames` end here is
    /// a stream of this app connection's one upstream connection).
    private var touched: [H2UpstreamEnd] = []
    /// DATA bytes the app sent that were passed on and not yet given back.
    private var window = ConsumedWindow()

    init(upstream: any H2UpstreamOpener) {
        self.upstream = upstream
    }

    func attached(_ context: ChannelHandlerContext) {
        self.context = context
    }

    func active(_ context: ChannelHandlerContext) {}

    func read(_ frame: HTTP2Frame, context _: ChannelHandlerContext) {
        let id = frame.streamID
        switch frame.payload {
        case .headers, .data:
            // Forwarded before its window is given back: a write on the
            // connection can deliver NIO's events at once, this stream's
            // StreamClosedEvent among them, which takes it out of `streams`.
            defer {
                if case .data(let data) = frame.payload, let context {
                    window.consumed(id, bytes: data.data.readableBytes + (data.paddingBytes ?? 0), endStream: data.endStream, on: context)
                }
            }
            switch streams[id] {
            case .open(let end, _):
                end.write(frame.payload)
                touched.append(end)
            case .opening(var pending, let stream):
                pending.append(frame.payload)
                streams[id] = .opening(pending, stream)
            case nil:
                guard case .headers = frame.payload else { return }
                let stream = BridgedStream(app: self, id: id)
                streams[id] = .opening([frame.payload], stream)
                upstream.openStream(for: stream) { end in self.opened(id, end) }
            }
        case .rstStream:
            if let leg = streams.removeValue(forKey: id), case .open(let end, _) = leg { end.reset() }
        case .settings, .ping, .goAway, .windowUpdate, .priority, .pushPromise, .alternativeService, .origin:
            break  // the connection's own, answered by NIO's handler
        }
    }

    private func opened(_ id: HTTP2StreamID, _ end: H2UpstreamEnd?) {
        guard case .opening(let pending, let stream) = streams[id] else {
            end?.reset()  // the app's stream ended meanwhile
            return
        }
        guard let end else { return send(id, .rstStream(.refusedStream)) }
        streams[id] = .open(end, stream)
        for payload in pending { end.write(payload) }
        end.flush()
    }

    /// NIO closed one of the app's streams: a reset one resets its upstream stream too.
    func closed(_ event: StreamClosedEvent) {
        guard let leg = streams.removeValue(forKey: event.streamID) else { return }
        if event.reason != nil, case .open(let end, _) = leg { end.reset() }
    }

    func send(_ id: HTTP2StreamID, _ payload: HTTP2Frame.FramePayload) {
        context?.write(NIOAny(HTTP2Frame(streamID: id, payload: payload)), promise: nil)
    }

    /// The upstream reset a stream that is still open here.
    func reset(_ id: HTTP2StreamID) {
        guard streams.removeValue(forKey: id) != nil else { return }
        send(id, .rstStream(.cancel))
    }

    func readComplete() {
        var flushedFrames = false
        for end in touched {
            if case .frames = end {
                if flushedFrames { continue }
                flushedFrames = true
            }
            end.flush()
        }
        touched.removeAll(keepingCapacity: true)
    }

    func closedConnection() {
        context = nil
        upstream.close()
    }
}

/// One app stream of a `FrameApp`, as its upstream stream sees it.
final class BridgedStream: H2AppEnd, @unchecked Sendable {
    /// Weak: the upstream connection outlives its app connection by a
    /// moment as it closes, and resets the streams it still has then.
    private weak var app: FrameApp?
    private let id: HTTP2StreamID

    init(app: FrameApp, id: HTTP2StreamID) {
        self.app = app
        self.id = id
    }

    func received(_ payload: HTTP2Frame.FramePayload) { app?.send(id, payload) }
    func flush() { app?.context?.flush() }
    var flushesConnection: Bool { true }
    func reset() { app?.reset(id) }
}

// MARK: the upstream's leg as frames

/// An app connection's one upstream h2 connection with its streams as
/// frames, dialled at the first stream (frames wait for the dial, already
/// carrying their upstream stream IDs). Confined to the app connection's loop.
final class FrameUpstream: H2UpstreamOpener, FrameLeg, @unchecked Sendable {
    private enum State {
        case idle
        case dialling([HTTP2Frame])
        case ready(ChannelHandlerContext)
        case closed
    }

    private let target: (host: String, port: Int)
    private let contexts: Contexts
    private let loop: any EventLoop
    private var state = State.idle
    private var nextID = HTTP2StreamID(1)
    private var streams: [HTTP2StreamID: any H2AppEnd] = [:]
    /// App ends that were handed payloads in this read, flushed at its end:
    /// each child channel, and the app connection once (`flushesConnection`).
    private var touched: [any H2AppEnd] = []
    /// DATA bytes the upstream sent that were passed on and not yet given back.
    private var window = ConsumedWindow()

    init(target: (host: String, port: Int), contexts: Contexts, loop: any EventLoop) {
        self.target = target
        self.contexts = contexts
        self.loop = loop
    }

    /// Opens at once: the ID is taken now, in the order the HEADERS are written.
    func openStream(for app: any H2AppEnd, then: @escaping (H2UpstreamEnd?) -> Void) {
        if case .closed = state { return then(nil) }
        let id = nextID
        nextID = nextID.advanced(by: 2)
        streams[id] = app
        then(.frames(self, id))
    }

    func write(_ frame: HTTP2Frame) {
        switch state {
        case .idle:
            state = .dialling([frame])
            dial()
        case .dialling(var waiting):
            waiting.append(frame)
            state = .dialling(waiting)
        case .ready(let context):
            context.write(NIOAny(frame), promise: nil)
        case .closed:
            break
        }
    }

    func flush() {
        if case .ready(let context) = state { context.flush() }
    }

    /// The app's stream ended early: its upstream stream is reset if still open.
    func reset(_ id: HTTP2StreamID) {
        guard streams.removeValue(forKey: id) != nil else { return }
        // Before any frame went the connection is not even dialled: nothing to reset.
        if case .idle = state { return }
        write(HTTP2Frame(streamID: id, payload: .rstStream(.cancel)))
        flush()
    }

    func close() {
        if case .ready(let context) = state { context.close(promise: nil) }
        state = .closed
    }

    func attached(_ context: ChannelHandlerContext) {}

    func read(_ frame: HTTP2Frame, context: ChannelHandlerContext) {
        switch frame.payload {
        case .headers, .data:
            // Forwarded first, as the app's leg does (`FrameApp.read`): the
            // window update's write can close the stream under it.
            if let app = streams[frame.streamID] {
                app.received(frame.payload)
                touched.append(app)
            }
            if case .data(let data) = frame.payload {
                window.consumed(frame.streamID, bytes: data.data.readableBytes + (data.paddingBytes ?? 0), endStream: data.endStream, on: context)
            }
        case .rstStream:
            streams.removeValue(forKey: frame.streamID)?.reset()
        case .settings, .ping, .goAway, .windowUpdate, .priority, .pushPromise, .alternativeService, .origin:
            break
        }
    }

    func closed(_ event: StreamClosedEvent) {
        guard let app = streams.removeValue(forKey: event.streamID) else { return }
        if event.reason != nil { app.reset() }
    }

    func readComplete() {
        var flushedConnection = false
        for app in touched {
            if app.flushesConnection {
                if flushedConnection { continue }
                flushedConnection = true
            }
            app.flush()
        }
        touched.removeAll(keepingCapacity: true)
    }

    func closedConnection() {
        state = .closed
        let apps = streams.values
        streams = [:]
        for app in apps { app.reset() }
    }

    private func dial() {
        let upstream = NIOLoopBound(self, eventLoop: loop)
        FloorDial.connect(target, tls: contexts.upstreamH2, on: loop) { sync in
            try sync.addHandlers([
                NIOHTTP2Handler(mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()),
                ConnectionFrames(upstream.value),
            ])
        }.assumeIsolated().whenFailure { _ in self.closedConnection() }
    }

    /// The connection is up and NIO's handler has sent its preamble (the
    /// connect's future completes before that: frames written then fail).
    func active(_ context: ChannelHandlerContext) {
        guard case .dialling(let waiting) = state else { return context.close(promise: nil) }
        state = .ready(context)
        for frame in waiting { context.write(NIOAny(frame), promise: nil) }
        context.flush()
    }
}

// MARK: either leg's connection

/// A connection's streams handled as frames: the app's (`FrameApp`) or
/// the upstream's (`FrameUpstream`).
protocol FrameLeg: AnyObject {
    /// The handler joined the connection's pipeline.
    func attached(_ context: ChannelHandlerContext)
    /// The connection is up and NIO's handler has sent its preamble.
    func active(_ context: ChannelHandlerContext)
    func read(_ frame: HTTP2Frame, context: ChannelHandlerContext)
    func readComplete()
    /// NIO closed one of the connection's streams.
    func closed(_ event: StreamClosedEvent)
    func closedConnection()
}

/// The frames of one leg's connection, after NIO's HTTP/2 handler.
final class ConnectionFrames<Leg: FrameLeg>: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let leg: Leg

    init(_ leg: Leg) {
        self.leg = leg
    }

    func handlerAdded(context: ChannelHandlerContext) {
        leg.attached(context)
    }

    func channelActive(context: ChannelHandlerContext) {
        leg.active(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        leg.read(unwrapInboundIn(data), context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        leg.readComplete()
        context.flush()  // window updates
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent { leg.closed(closed) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        leg.closedConnection()
    }
}

/// What NIO's stream channels and multiplexer did with a peer's DATA once
/// it was read: give its flow-control window back, on the connection and on
/// the stream, in steps of half the initial window (65,535 bytes; neither
/// side changes it here), so that a small response costs no WINDOW_UPDATE.
struct ConsumedWindow {
    private static let step = 32_768
    private var connection = 0
    private var streams: [HTTP2StreamID: Int] = [:]

    mutating func consumed(_ stream: HTTP2StreamID, bytes: Int, endStream: Bool, on context: ChannelHandlerContext) {
        guard bytes > 0 else { return }
        connection += bytes
        if connection >= Self.step {
            context.write(NIOAny(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connection))), promise: nil)
            connection = 0
        }
        if endStream {
            streams[stream] = nil  // the peer sends no more on it
            return
        }
        let taken = streams[stream, default: 0] + bytes
        if taken >= Self.step {
            context.write(NIOAny(HTTP2Frame(streamID: stream, payload: .windowUpdate(windowSizeIncrement: taken))), promise: nil)
            streams[stream] = nil
        } else {
            streams[stream] = taken
        }
    }
}
