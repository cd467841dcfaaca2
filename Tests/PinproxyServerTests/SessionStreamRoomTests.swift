import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// A session keeps the room of its ended upstream HTTP/2 streams for its
/// next request (`SessionStreamRoom`, `UpstreamStreamRoom`), with the real
/// pool, on an HTTP/2 connection over an `EmbeddedChannel`: the next stream
/// opens there without the pool, a request that finds the connection full
/// takes the kept room, SETTINGS and GOAWAY take it back, and a stream that
/// did not end both ways is reset rather than kept.
@Suite("Session stream room")
struct SessionStreamRoomTests {
    /// The pool, an HTTP/2 connection in it (dialled: the dialler's stream
    /// counted), and the connection's embedded channel.
    struct Setup {
        let proxy: EmbeddedProxy
        let plan: DialPlan
        let pool: UpstreamPool
        let checkout: UpstreamCheckout
        let channel: EmbeddedChannel
        let connection: UpstreamConnection

        init() throws {
            proxy = try EmbeddedProxy()
            let policy = try #require(proxy.services.store.snapshot.policy(forHost: "intercept.test"))
            plan = DialPlan(host: "intercept.test", port: 443, tls: true, policy: policy)
            pool = UpstreamPool()
            checkout = UpstreamCheckout(pool: pool, connector: proxy.services.connector, instrumentation: proxy.services.instrumentation)
            channel = EmbeddedChannel()
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            let multiplexer = try UpstreamHTTP2Pipeline.configure(channel, ready: channel.eventLoop.makePromise())
            guard case .ready(.permit) = pool.acquireNow(plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true,
                                                        on: channel.eventLoop) else {
                throw Expectation.notAPermit
            }
            connection = UpstreamConnection(channel: channel, key: plan.poolKey, multiplexer: multiplexer, pinEvaluation: nil, handshake: nil)
            pool.opened(connection)
            multiplexer.handler.onCapacity = { [pool, connection] capacity in pool.streamCapacityChanged(connection, to: capacity) }
        }

        /// A stream on the connection, whose room is counted already.
        func openStream() throws -> UpstreamConnection {
            var opened: Result<UpstreamCheckout.CheckedOut, any Error>?
            checkout.openStream(on: connection, policy: plan.policy) { opened = $0 }
            channel.embeddedEventLoop.run()
            return try #require(opened).get().connection
        }

        /// A stream the pool leases on the connection, opened.
        func leaseStream() throws -> UpstreamConnection {
            guard case .ready(.stream(let leased)) = pool.acquireNow(plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true,
                                                                     on: channel.eventLoop), leased === connection else {
                throw Expectation.notAStream
            }
            return try openStream()
        }

        /// The request's end sent; with `answered`, the response's end received.
        func exchange(on stream: UpstreamConnection, answered: Bool = true) throws {
            let receiver = Receiver()
            stream.receiver = receiver
            stream.write(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Host": "intercept.test"])))
            stream.write(.end(nil))
            stream.flush()
            if answered {
                let head = HTTP2Frame.FramePayload.headers(.init(headers: HPACKHeaders([(":status", "200")]), endStream: true))
                stream.channel.pipeline.fireChannelRead(head)
                #expect(receiver.ended)
            }
            #expect(stream.isComplete == answered)
        }

        /// A frame on the connection as NIO's HTTP/2 handler passes it on.
        func connectionFrame(_ payload: HTTP2Frame.FramePayload) throws {
            try channel.pipeline.syncOperations.context(handlerType: NIOHTTP2Handler.self)
                .fireChannelRead(NIOAny(HTTP2Frame(streamID: 0, payload: payload)))
        }

        /// A place in line that a test did not expect, let run out (a
        /// promise left pending would be reported as leaked).
        func expire(_ acquired: UpstreamPool.Acquired) {
            guard case .queued(let future) = acquired else { return }
            channel.embeddedEventLoop.advanceTime(by: .seconds(2))
            _ = try? future.wait()
        }

        func finish() {
            channel.embeddedEventLoop.run()
            _ = try? channel.finish(acceptAlreadyClosed: true)
        }
    }

    enum Expectation: Error { case notAPermit, notAStream }

    final class Receiver: UpstreamResponseReceiver {
        var ended = false
        func upstreamReceived(_ part: UpstreamResponsePart) { if case .end = part { ended = true } }
        func upstreamReadComplete() {}
        func upstreamWritabilityChanged() {}
        func upstreamClosed(_ error: (any Error)?) {}
    }

    @Test func aSessionsNextStreamOpensOnTheRoomItKept() throws {
        let s = try Setup()
        defer { s.finish() }
        let room = SessionStreamRoom()
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil, "nothing kept yet: the pool's")
        let first = try s.openStream()
        try s.exchange(on: first)
        room.keep(first, pool: s.pool)
        #expect(s.connection.streamRoom?.takeAll() == 1, "its room kept on the connection")
        s.connection.streamRoom?.keep()  // put back
        // The next request's stream: on the kept room, without the pool.
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) === s.connection)
        #expect(room.taken == 1)
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil, "one room kept, one taken")
        // Another pool key (a WebSocket's) never takes it.
        var http1 = s.plan
        http1.requiresHTTP1 = true
        let second = try s.openStream()
        try s.exchange(on: second)
        room.keep(second, pool: s.pool)
        #expect(room.take(for: http1.poolKey, pool: s.pool) == nil)
        // The session's close gives it back.
        room.giveBack(to: s.pool)
        #expect(s.connection.streamRoom?.takeAll() == 0)
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil)
    }

    @Test func aRequestFindingTheConnectionFullTakesTheKeptRoom() throws {
        let s = try Setup()
        defer { s.finish() }
        // The server allows one stream at a time.
        try s.connectionFrame(.settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 1)])))
        let room = SessionStreamRoom()
        let stream = try s.openStream()
        try s.exchange(on: stream)
        room.keep(stream, pool: s.pool)
        // Another app's request: the connection is full of the room kept, which it takes.
        let acquired = s.pool.acquireNow(s.plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true, on: s.channel.eventLoop)
        guard case .ready(.stream(let lent)) = acquired else {
            Issue.record("the kept room should be lent, not waited for: \(acquired)")
            s.expire(acquired)
            return
        }
        #expect(lent === s.connection)
        // The session finds none left and asks the pool, which has no room: a wait.
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil)
        guard case .queued(let answer) = s.pool.acquireNow(s.plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true,
                                                           on: s.channel.eventLoop) else {
            Issue.record("one stream, lent: the next request waits")
            return
        }
        // The stream lent ends (not kept): its room goes to the one waiting.
        s.pool.streamEnded(on: s.connection)
        if case .stream(let granted) = try answer.wait() { #expect(granted === s.connection) } else { Issue.record("a stream, granted") }
        s.pool.streamEnded(on: s.connection)
    }

    @Test func settingsAndGoAwayTakeTheKeptRoomBack() throws {
        let s = try Setup()
        defer { s.finish() }
        let room = SessionStreamRoom()
        let stream = try s.openStream()
        try s.exchange(on: stream)
        room.keep(stream, pool: s.pool)
        // New SETTINGS: the room kept under the old limit comes back to the pool.
        try s.connectionFrame(.settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: 10)])))
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil)
        // Kept again, then GOAWAY: given back, and the connection, now empty, closes.
        let next = try s.leaseStream()
        try s.exchange(on: next)
        room.keep(next, pool: s.pool)
        try s.connectionFrame(.goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
        s.channel.embeddedEventLoop.run()
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil)
        #expect(!s.channel.isActive, "drained after GOAWAY: closed")
    }

    @Test func aStreamThatDidNotEndBothWaysIsResetNotKept() throws {
        let s = try Setup()
        defer { s.finish() }
        let room = SessionStreamRoom()
        let stream = try s.openStream()
        try s.exchange(on: stream, answered: false)
        room.keep(stream, pool: s.pool)
        s.channel.embeddedEventLoop.run()
        #expect(!stream.channel.isActive, "reset")
        #expect(room.take(for: s.plan.poolKey, pool: s.pool) == nil)
        #expect(s.connection.streamRoom?.takeAll() == 0)
    }
}
