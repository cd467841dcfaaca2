import NIOCore
import Testing

@testable import PinproxyServer

/// Room on an HTTP/2 connection kept by the session whose stream ended
/// there (`UpstreamStreamRoom`): to the pool it is a stream, but a request
/// that finds the connection full takes it rather than dial or wait, and a
/// reload or shutdown takes it back as it takes idle connections. Room a
/// session is using (not kept) is never lent. Part of the machine's suite,
/// with its key, loops and clock.
extension UpstreamPoolStateMachineTests {
    /// How many rooms each connection has kept: `take` and `takeAll` as
    /// `UpstreamStreamRoom` does.
    final class Kept {
        var rooms: [ObjectIdentifier: Int] = [:]
        func take(_ connection: Conn) -> Bool {
            guard let count = rooms[ObjectIdentifier(connection)], count > 0 else { return false }
            rooms[ObjectIdentifier(connection)] = count - 1
            return true
        }
        func takeAll(_ connection: Conn) -> Int {
            rooms.removeValue(forKey: ObjectIdentifier(connection)) ?? 0
        }
        subscript(_ connection: Conn) -> Int {
            get { rooms[ObjectIdentifier(connection)] ?? 0 }
            set { rooms[ObjectIdentifier(connection)] = newValue }
        }
    }

    private func acquireKept(_ machine: inout Machine, loop: ObjectIdentifier, limit: Int, kept: Kept) -> (String, Machine.Action) {
        let action = machine.acquire(key, limit: limit, loop: loop, now: t0, queueTimeout: .seconds(5), mayMultiplex: true,
                                     isAlive: { _ in true }, reclaim: kept.take)
        switch action.acquisition {
        case .lease?: return ("lease", action)
        case .stream?: return ("stream", action)
        case .dial?: return ("dial", action)
        case .wait?: return ("wait", action)
        case nil: return ("nothing", action)
        }
    }

    /// An HTTP/2 connection dialled on `loop` that carries `capacity`
    /// streams, with `streams` of them counted (the dialler's and those
    /// granted after it).
    private func http2Connection(_ machine: inout Machine, on loop: ObjectIdentifier, limit: Int, capacity: Int,
                                 streams: Int, kept: Kept) -> Conn {
        #expect(acquireKept(&machine, loop: loop, limit: limit, kept: kept).0 == "dial")
        let connection = Conn()
        machine.dialled(key, connection: connection, loop: loop, streams: capacity)
        for _ in 1..<streams { #expect(acquireKept(&machine, loop: loop, limit: limit, kept: kept).0 == "stream") }
        #expect(machine.entries[key]?.members.last?.state == .streaming(streams))
        return connection
    }

    @Test func aConnectionFullOfKeptRoomLendsItRatherThanLetARequestWait() {
        var machine = Machine()
        let kept = Kept()
        let connection = http2Connection(&machine, on: loopA, limit: 1, capacity: 2, streams: 2, kept: kept)
        // Both streams in use: the next request waits in line.
        #expect(acquireKept(&machine, loop: loopA, limit: 1, kept: kept).0 == "wait")
        // One of them ended and its session keeps the room: a request takes it.
        kept[connection] = 1
        let (answer, action) = acquireKept(&machine, loop: loopA, limit: 1, kept: kept)
        #expect(answer == "stream")
        if case .stream(let lent)? = action.acquisition { #expect(lent === connection) }
        #expect(kept[connection] == 0, "taken from the session that kept it")
        #expect(machine.entries[key]?.members.first?.state == .streaming(2), "the room was counted already")
    }

    @Test func atTheLimitRoomKeptOnAnotherLoopsConnectionIsLent() {
        var machine = Machine()
        let kept = Kept()
        let connection = http2Connection(&machine, on: loopA, limit: 1, capacity: 1, streams: 1, kept: kept)
        kept[connection] = 1
        let (answer, action) = acquireKept(&machine, loop: loopB, limit: 1, kept: kept)
        #expect(answer == "stream", "no wait in line while the server would take a stream")
        if case .stream(let lent)? = action.acquisition { #expect(lent === connection) }
        #expect(machine.entries[key]?.open == 1)
        // Under the limit, a request on another loop dials its own and leaves the room kept.
        var roomy = Machine()
        let alsoKept = Kept()
        let other = http2Connection(&roomy, on: loopA, limit: 2, capacity: 1, streams: 1, kept: alsoKept)
        alsoKept[other] = 1
        #expect(acquireKept(&roomy, loop: loopB, limit: 2, kept: alsoKept).0 == "dial")
        #expect(alsoKept[other] == 1)
    }

    @Test func aConnectionWithFreeRoomCountsAnotherStreamAndLeavesTheKeptRoom() {
        var machine = Machine()
        let kept = Kept()
        let connection = http2Connection(&machine, on: loopA, limit: 1, capacity: 8, streams: 1, kept: kept)
        kept[connection] = 1
        #expect(acquireKept(&machine, loop: loopA, limit: 1, kept: kept).0 == "stream")
        #expect(kept[connection] == 1, "the session's room stays its own while the connection has room")
        #expect(machine.entries[key]?.members.first?.state == .streaming(2))
    }

    @Test func keptRoomGivenBackEndsThatManyStreams() {
        var machine = Machine()
        let kept = Kept()
        let connection = http2Connection(&machine, on: loopA, limit: 1, capacity: 8, streams: 3, kept: kept)
        #expect(machine.streamEnded(key, connection: connection, ended: 2, now: t0).close.isEmpty)
        #expect(machine.entries[key]?.members.first?.state == .streaming(1))
        let idle = machine.streamEnded(key, connection: connection, ended: 1, now: t0)
        #expect(machine.entries[key]?.members.first?.state == .idle(since: t0))
        #expect(idle.idleTimers.count == 1 && idle.idleTimers[0].at == t0 + machine.maxIdle,
                "its idle time counts from when the room was last kept")
    }

    @Test func aReloadAndShutdownTakeKeptRoomBackAndCloseWhatItAloneHeld() {
        var machine = Machine()
        let kept = Kept()
        let onlyKept = http2Connection(&machine, on: loopA, limit: 2, capacity: 1, streams: 1, kept: kept)
        let busy = http2Connection(&machine, on: loopB, limit: 2, capacity: 4, streams: 3, kept: kept)
        kept[onlyKept] = 1
        kept[busy] = 2  // one stream still open
        let retired = machine.retire(keeping: ["d2"], reclaim: kept.take, reclaimRoom: kept.takeAll).close
        #expect(retired.count == 1 && retired[0] === onlyKept)
        #expect(machine.entries[key]?.members.count == 1 && machine.entries[key]?.members[0].state == .streaming(1),
                "the busy one keeps its open stream, and goes when it ends")
        #expect(kept[busy] == 0)
        #expect(machine.streamEnded(key, connection: busy, now: t0).close.first === busy)

        var other = Machine()
        let atShutdown = Kept()
        let idleButKept = http2Connection(&other, on: loopA, limit: 1, capacity: 2, streams: 2, kept: atShutdown)
        atShutdown[idleButKept] = 2
        let closed = other.closeIdle(reclaim: atShutdown.take, reclaimRoom: atShutdown.takeAll).close
        #expect(closed.count == 1 && closed[0] === idleButKept)
    }

    @Test func aStreamRoomIsTakenOnceByWhoeverComesFirst() {
        let room = UpstreamStreamRoom()
        #expect(!room.take(), "none kept")
        room.keep()
        room.keep()
        #expect(room.take())
        room.keep()
        #expect(room.takeAll() == 2)
        #expect(!room.take() && room.takeAll() == 0, "taken already")
    }
}
