import NIOCore
import Testing

@testable import PinproxyServer

/// The pool's bookkeeping alone: slots, idle connections per event loop on
/// a monotonic clock, waiters, slots handed over, retirement on reload.
@Suite("Upstream pool state machine")
struct UpstreamPoolStateMachineTests {
    final class Conn {}
    final class Loop {}
    typealias Machine = UpstreamPoolStateMachine<Conn>

    let key = UpstreamPool.Key(digest: "d1", host: "a.test", port: 443, tls: true)
    // The loops are kept alive: an identifier of a freed object can be reused.
    let loops = [Loop(), Loop()]
    var loopA: ObjectIdentifier { ObjectIdentifier(loops[0]) }
    var loopB: ObjectIdentifier { ObjectIdentifier(loops[1]) }
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    /// A policy refusal of a dial: it backs nothing off (see UpstreamPoolBackoffTests for the rest).
    static let guardRefusal = ProxyError(.ssrfBlocked, host: "a.test", detail: "127.0.0.1 is private")

    private func acquire(_ machine: inout Machine, loop: ObjectIdentifier, at now: NIODeadline, limit: Int = 1,
                         mayMultiplex: Bool = false) -> String {
        switch machine.acquire(key, limit: limit, loop: loop, now: now, queueTimeout: .seconds(5), mayMultiplex: mayMultiplex, isAlive: { _ in true }).acquisition {
        case .lease?: return "lease"
        case .stream?: return "stream"
        case .dial?: return "dial"
        case .wait(let id, _)?: return "wait#\(id)"
        case nil: return "nothing"
        }
    }

    /// A release's answer as (the one waiter served, the connection closed).
    static func single(_ action: Machine.Action) -> (Machine.HandOver?, Conn?) {
        (action.handOvers.first, action.close.first)
    }

    /// An event's answer as (the waiters served, the connection closed).
    static func many(_ action: Machine.Action) -> ([Machine.HandOver], Conn?) {
        (action.handOvers, action.close.first)
    }

    @Test func aReleasedConnectionIsLentAgainOnItsOwnLoopAndCountsAreDerived() {
        var machine = Machine()
        let conn = Conn()
        #expect(acquire(&machine, loop: loopA, at: t0) == "dial")
        #expect(machine.entries[key]?.open == 1)
        machine.dialled(key, connection: conn, loop: loopA)
        #expect(machine.entries[key]?.open == 1)
        _ = machine.release(key, connection: conn, reusable: true, now: t0)
        #expect(machine.entries[key]?.idleCount == 1)
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(1)) == "lease")
        #expect(machine.entries[key]?.idleCount == 0)
    }

    @Test func pastTheLimitARequestWaitsAndGetsTheConnectionOnRelease() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        #expect(acquire(&machine, loop: loopA, at: t0) == "wait#1")
        let (handOver, close) = Self.single(machine.release(key, connection: conn, reusable: true, now: t0))
        #expect(handOver?.waiter.id == 1)
        if case .connection(let given)? = handOver?.grant { #expect(given === conn) } else { Issue.record("the connection itself") }
        #expect(close == nil)
    }

    @Test func aWaiterOnAnotherLoopGetsTheSlotAndTheConnectionCloses() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        #expect(acquire(&machine, loop: loopB, at: t0) == "wait#1")
        let (handOver, close) = Self.single(machine.release(key, connection: conn, reusable: true, now: t0))
        if case .permit? = handOver?.grant {} else { Issue.record("a permit to dial") }
        #expect(close === conn)
        #expect(machine.entries[key]?.open == 1, "the slot moved, it was not freed")
    }

    @Test func anIdleConnectionPastMaxIdleIsClosedNotLent() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        _ = machine.release(key, connection: conn, reusable: true, now: t0)
        let action = machine.acquire(key, limit: 1, loop: loopA, now: t0 + .seconds(61), queueTimeout: .seconds(5), isAlive: { _ in true })
        let close = action.close
        if case .dial? = action.acquisition {} else { Issue.record("a fresh dial") }
        #expect(close.count == 1 && close[0] === conn)
    }

    @Test func aDialRefusedByTheGuardOrAClosedConnectionPassesItsSlotToTheNextWaiter() {
        var machine = Machine()
        _ = acquire(&machine, loop: loopA, at: t0)
        #expect(acquire(&machine, loop: loopB, at: t0) == "wait#1")
        let handOvers = machine.dialFailed(key, failure: Self.guardRefusal).handOvers
        #expect(grants(handOvers) == ["#1 permit"])
        #expect(machine.entries[key]?.open == 1)
        let conn = Conn()
        machine.dialled(key, connection: conn, loop: loopB)
        #expect(acquire(&machine, loop: loopA, at: t0) == "wait#2")
        #expect(machine.closed(key, connection: conn).handOvers.first?.waiter.id == 2)
    }

    @Test func anExpiredWaiterLeavesTheLine() {
        var machine = Machine()
        _ = acquire(&machine, loop: loopA, at: t0)
        #expect(acquire(&machine, loop: loopA, at: t0) == "wait#1")
        let first = machine.waiterExpired(key, id: 1)
        let second = machine.waiterExpired(key, id: 1)
        #expect(first.expired.map { $0.waiter.id } == [1], "it fails")
        #expect(first.expired.first?.lastDialFailure == nil, "with queue_timeout: no dial had failed")
        #expect(second.expired.isEmpty, "once")
        let handOvers = machine.dialFailed(key, failure: Self.guardRefusal).handOvers
        #expect(handOvers.isEmpty, "no one waits any more")
        #expect(machine.entries[key] == nil, "an empty key is forgotten")
    }

    @Test func aReloadRetiresIdleConnectionsNowAndLeasedOnesOnRelease() {
        var machine = Machine()
        let idle = Conn()
        let leased = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, limit: 2)
        machine.dialled(key, connection: idle, loop: loopA)
        _ = acquire(&machine, loop: loopA, at: t0, limit: 2)
        machine.dialled(key, connection: leased, loop: loopA)
        _ = machine.release(key, connection: idle, reusable: true, now: t0)
        let retired = machine.retire(keeping: ["d2"]).close
        #expect(retired.count == 1 && retired[0] === idle)
        let (_, close) = Self.single(machine.release(key, connection: leased, reusable: true, now: t0))
        #expect(close === leased, "opened under a policy that changed: not pooled again")
    }

    @Test func anUnreusableConnectionIsClosedAndItsSlotFreed() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        let (handOver, close) = Self.single(machine.release(key, connection: conn, reusable: false, now: t0))
        #expect(handOver == nil)
        #expect(close === conn)
        #expect(machine.entries[key] == nil)
    }

    // MARK: HTTP/2 connections (docs/contract.md §11)

    private func grants(_ handOvers: [Machine.HandOver]) -> [String] {
        handOvers.map { handOver in
            switch handOver.grant {
            case .connection: return "#\(handOver.waiter.id) connection"
            case .stream: return "#\(handOver.waiter.id) stream"
            case .permit: return "#\(handOver.waiter.id) permit"
            }
        }
    }

    @Test func anHTTP2ConnectionCarriesStreamsUpToItsCapacityAndCountsAsOneConnection() {
        var machine = Machine()
        let conn = Conn()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "dial")
        machine.dialled(key, connection: conn, loop: loopA, streams: 3)
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "stream")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "stream")
        #expect(machine.entries[key]?.members.first?.state == .streaming(3))
        #expect(machine.entries[key]?.open == 1)
        // Full, and max_upstream_connections (1) reached: the fourth waits in the same line.
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "wait#1")
        let (handOvers, close) = Self.many(machine.streamEnded(key, connection: conn, now: t0))
        #expect(grants(handOvers) == ["#1 stream"])
        #expect(close == nil)
        #expect(machine.entries[key]?.members.first?.state == .streaming(3))
    }

    @Test func atTheLimitAnHTTP2ConnectionWithRoomCarriesARequestFromAnotherLoop() {
        var machine = Machine()
        let conn = Conn()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "dial")
        machine.dialled(key, connection: conn, loop: loopA, streams: 8)
        // max_upstream_connections 1 forbids a dial on loop B; the stream is free.
        #expect(acquire(&machine, loop: loopB, at: t0, limit: 1, mayMultiplex: true) == "stream")
        #expect(machine.entries[key]?.members.first?.state == .streaming(2))
        #expect(machine.entries[key]?.open == 1)
        // Under the limit, loop B dials its own instead (no hop between loops).
        #expect(acquire(&machine, loop: loopB, at: t0, limit: 2, mayMultiplex: true) == "dial")
    }

    @Test func atTheLimitAStreamsEndGivesItsRoomToAWaiterOnAnotherLoop() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 1)
        #expect(acquire(&machine, loop: loopB, at: t0, limit: 1, mayMultiplex: true) == "wait#1")
        let (handOvers, close) = Self.many(machine.streamEnded(key, connection: conn, now: t0))
        #expect(grants(handOvers) == ["#1 stream"])
        #expect(close == nil)
        #expect(machine.entries[key]?.members.first?.state == .streaming(1))
    }

    @Test func requestsWaitBehindAFirstDialThatMayBeHTTP2AndRideOnItsStreams() {
        var machine = Machine()
        let conn = Conn()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 8, mayMultiplex: true) == "dial")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 8, mayMultiplex: true) == "wait#1")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 8, mayMultiplex: true) == "wait#2")
        #expect(machine.entries[key]?.open == 1)
        let handOvers = machine.dialled(key, connection: conn, loop: loopA, streams: 100).handOvers
        #expect(grants(handOvers) == ["#1 stream", "#2 stream"])
        #expect(machine.entries[key]?.members.first?.state == .streaming(3))
        #expect(machine.entries[key]?.waiters.isEmpty == true)
    }

    @Test func requestsThatWaitedBehindADialThatTurnedOutHTTP1GetSlotsToDial() {
        var machine = Machine()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2, mayMultiplex: true) == "dial")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2, mayMultiplex: true) == "wait#1")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2, mayMultiplex: true) == "wait#2")
        let handOvers = machine.dialled(key, connection: Conn(), loop: loopA).handOvers
        // One slot left under the limit: the first waiter dials, the second keeps waiting.
        #expect(grants(handOvers) == ["#1 permit"])
        #expect(machine.entries[key]?.open == 2)
        // Known HTTP/1.1 now: nobody waits behind a dial any more.
        #expect(acquire(&machine, loop: loopB, at: t0, limit: 3, mayMultiplex: true) == "dial")
    }

    @Test func withoutMultiplexingABurstDialsUpToTheLimitAsBefore() {
        var machine = Machine()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2) == "dial")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2) == "dial")
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 2) == "wait#1")
    }

    @Test func anIdleHTTP2ConnectionIsReusedAndGOAWAYDrainsItThenClosesIt() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, limit: 4, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 10)
        _ = machine.streamEnded(key, connection: conn, now: t0)
        #expect(machine.entries[key]?.idleCount == 1)
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(1), limit: 4, mayMultiplex: true) == "stream")
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(1), limit: 4, mayMultiplex: true) == "stream")
        // GOAWAY: no new stream on it; the streams in flight finish.
        let (none, stillOpen) = Self.many(machine.streamCapacityChanged(key, connection: conn, to: 0))
        #expect(none.isEmpty && stillOpen == nil)
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(2), limit: 4, mayMultiplex: true) == "dial")
        _ = machine.streamEnded(key, connection: conn, now: t0 + .seconds(3))
        let (_, close) = Self.many(machine.streamEnded(key, connection: conn, now: t0 + .seconds(3)))
        #expect(close === conn)
        #expect(machine.entries[key]?.members.isEmpty == true)
    }

    @Test func aLowerStreamLimitFromSettingsHoldsNewStreamsBack() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 100)
        _ = machine.streamCapacityChanged(key, connection: conn, to: 1)
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "wait#1")
        let (handOvers, _) = Self.many(machine.streamCapacityChanged(key, connection: conn, to: 2))
        #expect(grants(handOvers) == ["#1 stream"])
    }

    @Test func anHTTP2ConnectionThatClosesGivesItsSlotToAWaiter() {
        var machine = Machine()
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 1)
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 1, mayMultiplex: true) == "wait#1")
        let handOver = machine.closed(key, connection: conn).handOvers.first
        #expect(handOver?.waiter.id == 1)
        // Its streams' ends, reported later, change nothing.
        let (late, close) = Self.many(machine.streamEnded(key, connection: conn, now: t0))
        #expect(late.isEmpty && close == nil)
        #expect(machine.entries[key]?.open == 1)
    }
    @Test func aFirstDialThatMayBeHTTP2RefusedByTheGuardLetsItsWaitersDialUpToTheLimit() {
        var machine = Machine()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 3, mayMultiplex: true) == "dial")
        for id in 1...4 {
            #expect(acquire(&machine, loop: loopA, at: t0, limit: 3, mayMultiplex: true) == "wait#\(id)")
        }
        // A policy refusal, not the host's failure: each waiter gets its own
        // refusal at once. Three slots, three dials (no backoff).
        #expect(grants(machine.dialFailed(key, failure: Self.guardRefusal).handOvers) == ["#1 permit", "#2 permit", "#3 permit"])
        #expect(machine.entries[key]?.open == 3)
        #expect(machine.entries[key]?.waiters.map(\.id) == [4])
    }

    @Test func waitersLeftOnAFullHTTP2ConnectionDialASecondOneOneAtATime() {
        var machine = Machine()
        let first = Conn(), second = Conn()
        #expect(acquire(&machine, loop: loopA, at: t0, limit: 4, mayMultiplex: true) == "dial")
        for id in 1...4 {
            #expect(acquire(&machine, loop: loopA, at: t0, limit: 4, mayMultiplex: true) == "wait#\(id)")
        }
        // Two streams a connection: one waiter rides on it, one dials a second.
        #expect(grants(machine.dialled(key, connection: first, loop: loopA, streams: 2).handOvers) == ["#1 stream", "#2 permit"])
        // A stream ends before that dial is done: its room goes to a waiter, no second dial.
        #expect(grants(machine.streamEnded(key, connection: first, now: t0).handOvers) == ["#3 stream"])
        #expect(grants(machine.dialled(key, connection: second, loop: loopA, streams: 2).handOvers) == ["#4 stream"])
        #expect(machine.entries[key]?.open == 2)
        #expect(machine.entries[key]?.waiters.isEmpty == true)
    }

    // MARK: Timers (issue 29: queue and idle timers are the machine's decisions)

    /// A machine whose one HTTP/1.1 connection was dialled and went idle at t0.
    private func idledAtT0() -> (Machine, Conn) {
        var machine = Machine(maxIdle: .seconds(60))
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        _ = machine.release(key, connection: conn, reusable: true, now: t0)
        return (machine, conn)
    }

    @Test func aPlaceInLineCarriesItsQueueTimeout() {
        var machine = Machine()
        _ = acquire(&machine, loop: loopA, at: t0)
        let action = machine.acquire(key, limit: 1, loop: loopA, now: t0, queueTimeout: .seconds(7), isAlive: { _ in true })
        guard case .wait(let id, let timeout)? = action.acquisition else {
            Issue.record("a place in line: \(String(describing: action.acquisition))")
            return
        }
        #expect(id == 1 && timeout == .seconds(7))
    }

    @Test func anIdleConnectionGetsOneTimerAndClosesWhenItFiresPastMaxIdle() {
        var machine = Machine(maxIdle: .seconds(60))
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0)
        machine.dialled(key, connection: conn, loop: loopA)
        let first = machine.release(key, connection: conn, reusable: true, now: t0)
        #expect(first.idleTimers.count == 1 && first.idleTimers[0].connection === conn && first.idleTimers[0].at == t0 + .seconds(60))
        // Lent and idled again: the armed timer is enough, none more is scheduled.
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(10)) == "lease")
        let second = machine.release(key, connection: conn, reusable: true, now: t0 + .seconds(20))
        #expect(second.idleTimers.isEmpty)
        // The timer fires at t0+60 s, 40 s into this idle time: re-armed for the rest.
        let early = machine.idleTimeout(key, connection: conn, now: t0 + .seconds(60))
        #expect(early.close.isEmpty)
        #expect(early.idleTimers.count == 1 && early.idleTimers[0].at == t0 + .seconds(80))
        let due = machine.idleTimeout(key, connection: conn, now: t0 + .seconds(80))
        #expect(due.close.count == 1 && due.close[0] === conn)
        #expect(machine.entries[key] == nil, "an empty key is forgotten")
    }

    @Test func anIdleTimerFiringOnALeasedConnectionDisarmsAndTheNextIdleTimeArmsOne() {
        let (idled, conn) = idledAtT0()
        var machine = idled
        #expect(acquire(&machine, loop: loopA, at: t0 + .seconds(30)) == "lease")
        let fired = machine.idleTimeout(key, connection: conn, now: t0 + .seconds(60))
        #expect(fired.close.isEmpty && fired.idleTimers.isEmpty, "in use: nothing to close, no timer")
        let again = machine.release(key, connection: conn, reusable: true, now: t0 + .seconds(90))
        #expect(again.idleTimers.count == 1 && again.idleTimers[0].at == t0 + .seconds(150))
    }

    @Test func anHTTP2ConnectionWhoseLastStreamEndsGetsAnIdleTimer() {
        var machine = Machine(maxIdle: .seconds(60))
        let conn = Conn()
        _ = acquire(&machine, loop: loopA, at: t0, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 10)
        let ended = machine.streamEnded(key, connection: conn, now: t0)
        #expect(ended.idleTimers.count == 1 && ended.idleTimers[0].at == t0 + .seconds(60))
        let closed = machine.idleTimeout(key, connection: conn, now: t0 + .seconds(60))
        #expect(closed.close.count == 1 && closed.close[0] === conn)
    }

    @Test func anIdleTimerForAConnectionAlreadyGoneDoesNothing() {
        let (idled, conn) = idledAtT0()
        var machine = idled
        _ = machine.closed(key, connection: conn)
        let late = machine.idleTimeout(key, connection: conn, now: t0 + .seconds(60))
        #expect(late.close.isEmpty && late.idleTimers.isEmpty && late.handOvers.isEmpty)
    }
}
