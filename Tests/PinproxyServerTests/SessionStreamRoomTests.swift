import NIOCore
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

    final class Receiver: UpstreamResponseReceiver {
        var ended = false
        func upstreamReceived(_ part: UpstreamResponsePart) { if case .end = part { ended = true } }
        func upstreamReadComplete() {}
        func upstreamWritabilityChanged() {}
        func upstreamClosed(_ error: (any Error)?) {}
    }

    @Test func aSessionsNextStreamOpensOnTheRoomItKept() throws {
        let s = try PooledHTTP2Connection()
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
        let http1 = s.plan.requiringHTTP1()
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
        let s = try PooledHTTP2Connection()
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
        let s = try PooledHTTP2Connection()
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
        let s = try PooledHTTP2Connection()
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

/// The stream room's tests' exchanges on the fixture's streams.
extension PooledHTTP2Connection {
    /// The request's end sent; with `answered`, the response's end received.
    func exchange(on stream: UpstreamConnection, answered: Bool = true) throws {
        let receiver = SessionStreamRoomTests.Receiver()
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
}
