import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// Dial backoff as a decision of the pool machine (docs/contract.md §10,
/// "Dial backoff"): no sockets, the jitter injected, timers as actions.
@Suite("Upstream pool dial backoff")
struct UpstreamPoolBackoffTests {
    typealias Conn = UpstreamPoolStateMachineTests.Conn
    typealias Machine = UpstreamPoolStateMachine<Conn>
    /// The pool machine tests' fixture: the same key, event loops and start time.
    let fixture = UpstreamPoolStateMachineTests()
    var key: UpstreamPool.Key { fixture.key }
    var loopA: ObjectIdentifier { fixture.loopA }
    var loopB: ObjectIdentifier { fixture.loopB }
    var t0: NIODeadline { fixture.t0 }
    static let refused = ProxyError(.connectFailed, host: "a.test", detail: "connecting to 127.0.0.1:1: connection refused")
    static let badPin = ProxyError(.pinMismatch, host: "a.test", detail: "no active pin matches the verified chain")

    /// No jitter: each delay is its whole step.
    static func machine() -> Machine { Machine(dialBackoff: DialBackoff(random: { 0 })) }

    private func acquire(_ machine: inout Machine, loop: ObjectIdentifier? = nil, limit: Int = 4, mayMultiplex: Bool = false) -> String {
        let action = machine.acquire(key, limit: limit, loop: loop ?? loopA, now: t0, queueTimeout: .seconds(5),
                                     mayMultiplex: mayMultiplex, isAlive: { _ in true })
        switch action.acquisition {
        case .lease?: return "lease"
        case .stream?: return "stream"
        case .dial?: return "dial"
        case .wait(let id, _)?: return "wait#\(id)"
        case nil: return "nothing"
        }
    }

    private func grants(_ action: Machine.Action) -> [String] {
        action.handOvers.map { handOver in
            switch handOver.grant {
            case .connection: return "#\(handOver.waiter.id) connection"
            case .stream: return "#\(handOver.waiter.id) stream"
            case .permit: return "#\(handOver.waiter.id) permit"
            }
        }
    }

    /// The delay of the timer an action arms, and its id.
    private func scheduled(_ action: Machine.Action) -> (id: Int, delay: TimeAmount)? {
        guard case .schedule(let id, let delay)? = action.backoffTimer else { return nil }
        return (id, delay)
    }

    // MARK: The delays

    @Test(arguments: [
        (failures: 1, random: 0.0, delay: TimeAmount.milliseconds(100)),
        (failures: 2, random: 0.0, delay: .milliseconds(200)),
        (failures: 3, random: 0.0, delay: .milliseconds(400)),
        (failures: 6, random: 0.0, delay: .milliseconds(3200)),
        (failures: 7, random: 0.0, delay: .seconds(5)),  // capped
        (failures: 1000, random: 0.0, delay: .seconds(5)),  // no overflow
        (failures: 1, random: 0.5, delay: .milliseconds(90)),  // a tenth off
        (failures: 7, random: 0.75, delay: .milliseconds(4250)),  // at most a fifth off
    ])
    func theDelayDoublesFrom100msUpTo5sLessItsJitter(failures: Int, random: Double, delay: TimeAmount) {
        #expect(DialBackoff(random: { random }).delay(afterFailures: failures) == delay)
    }

    @Test func onlyFailuresOfTheUpstreamBackOffNotPolicyRefusals() {
        let backsOff = RefusalCode.allCases.filter { DialBackoff.backsOff(after: $0) }
        #expect(Set(backsOff) == [.connectFailed, .upstreamTimeout, .tlsHandshake, .tlsVersion, .tlsCipher, .verifyFailed,
                                  .pinMismatch, .pinsExpired])
    }

    // MARK: The machine

    @Test func aFailedDialSchedulesTheTimerAndRequestsWaitWithoutDialling() {
        var machine = Self.machine()
        #expect(acquire(&machine) == "dial")
        let failed = machine.dialFailed(key, failure: Self.refused)
        #expect(scheduled(failed)?.delay == .milliseconds(100))
        #expect(failed.handOvers.isEmpty)
        // Under the limit (4) and nothing open: still no dial until the timer fires.
        #expect(acquire(&machine) == "wait#1")
        #expect(acquire(&machine, loop: loopB) == "wait#2")
        #expect(machine.entries[key]?.starting == 0)
    }

    @Test func theTimerFiringMakesOneDialForTheLineAndASecondFailureDoublesTheDelay() throws {
        var machine = Self.machine()
        _ = acquire(&machine)
        let first = try #require(scheduled(machine.dialFailed(key, failure: Self.refused)))
        for id in 1...3 { #expect(acquire(&machine) == "wait#\(id)") }
        #expect(grants(machine.backoffTimerFired(key, id: first.id)) == ["#1 permit"])
        // While that dial is under way, nothing else dials.
        #expect(acquire(&machine) == "wait#4")
        let second = machine.dialFailed(key, failure: Self.badPin)
        #expect(scheduled(second)?.delay == .milliseconds(200))
        #expect(second.handOvers.isEmpty)
        let third = try #require(scheduled(second))
        #expect(grants(machine.backoffTimerFired(key, id: third.id)) == ["#2 permit"])
        #expect(scheduled(machine.dialFailed(key, failure: Self.refused))?.delay == .milliseconds(400))
    }

    @Test func theDelayStopsAtTheCap() {
        var machine = Self.machine()
        var delays: [TimeAmount] = []
        for _ in 1...8 {
            #expect(acquire(&machine) == "dial")
            let failed = machine.dialFailed(key, failure: Self.refused)
            guard let timer = scheduled(failed) else { Issue.record("no timer: \(failed)"); return }
            delays.append(timer.delay)
            // Fired with no one waiting: the next request dials at once.
            _ = machine.backoffTimerFired(key, id: timer.id)
        }
        #expect(delays.map { $0.nanoseconds / 1_000_000 } == [100, 200, 400, 800, 1600, 3200, 5000, 5000])
    }

    @Test func aSuccessfulDialEndsBackoffCancelsTheTimerAndServesTheLine() throws {
        var machine = Self.machine()
        _ = acquire(&machine)
        let timer = try #require(scheduled(machine.dialFailed(key, failure: Self.refused)))
        for id in 1...3 { #expect(acquire(&machine) == "wait#\(id)") }
        _ = machine.backoffTimerFired(key, id: timer.id)
        // HTTP/1.1: the line gets slots up to the limit (4) at once.
        let dialled = machine.dialled(key, connection: Conn(), loop: loopA)
        #expect(grants(dialled) == ["#2 permit", "#3 permit"])
        #expect(dialled.backoffTimer == nil, "no timer was armed any more")
        // A dial begun during backoff succeeding cancels the armed timer.
        var other = Self.machine()
        _ = acquire(&other)
        _ = acquire(&other)
        let armed = try #require(scheduled(other.dialFailed(key, failure: Self.refused)))
        #expect(other.dialled(key, connection: Conn(), loop: loopA).backoffTimer == .cancel(id: armed.id))
        // Reset: the next failure starts again at 100 ms.
        #expect(acquire(&other) == "dial")
        #expect(scheduled(other.dialFailed(key, failure: Self.refused))?.delay == .milliseconds(100))
    }

    @Test func aFailureReportedWhileTheTimerRunsIsRememberedNotDoubled() throws {
        var machine = Self.machine()
        #expect(acquire(&machine) == "dial")
        #expect(acquire(&machine) == "dial")
        _ = try #require(scheduled(machine.dialFailed(key, failure: Self.refused)))
        let late = ProxyError(.upstreamTimeout, host: "a.test", detail: "connecting to 127.0.0.1:1 took longer than 1 s")
        let second = machine.dialFailed(key, failure: late)
        #expect(second.backoffTimer == nil && second.handOvers.isEmpty)
        #expect(acquire(&machine) == "wait#1")
        #expect(machine.waiterExpired(key, id: 1).expired.first?.lastDialFailure?.code == .upstreamTimeout)
    }

    @Test func aRequestWhoseQueueTimeoutPassesInBackoffReportsTheLastDialsFailure() {
        var machine = Self.machine()
        _ = acquire(&machine)
        _ = machine.dialFailed(key, failure: Self.badPin)
        #expect(acquire(&machine) == "wait#1")
        let expired = machine.waiterExpired(key, id: 1).expired
        #expect(expired.map { $0.waiter.id } == [1])
        #expect(expired.first?.lastDialFailure?.code == .pinMismatch)
    }

    @Test func http2WaitersBehindAFailedFirstDialWaitForTheTimerThenRideOnTheProbesStreams() throws {
        var machine = Self.machine()
        #expect(acquire(&machine, limit: 8, mayMultiplex: true) == "dial")
        for id in 1...4 { #expect(acquire(&machine, limit: 8, mayMultiplex: true) == "wait#\(id)") }
        let failed = machine.dialFailed(key, failure: Self.refused)
        #expect(failed.handOvers.isEmpty, "no dial storm: they wait for the timer")
        let timer = try #require(scheduled(failed))
        #expect(grants(machine.backoffTimerFired(key, id: timer.id)) == ["#1 permit"])
        let dialled = machine.dialled(key, connection: Conn(), loop: loopA, streams: 100)
        #expect(grants(dialled) == ["#2 stream", "#3 stream", "#4 stream"])
        #expect(dialled.backoffTimer == nil)
    }

    @Test func inBackoffAnHTTP2ConnectionWithRoomServesARequestFromAnotherLoop() {
        var machine = Self.machine()
        let conn = Conn()
        _ = acquire(&machine, limit: 4, mayMultiplex: true)
        machine.dialled(key, connection: conn, loop: loopA, streams: 8)
        // A second connection's dial (the first one full, say) fails: backoff.
        _ = acquire(&machine, loop: loopB, limit: 4)
        _ = machine.dialFailed(key, failure: Self.refused)
        // Under the limit, loop B would dial its own; in backoff it takes a stream on loop A's.
        #expect(acquire(&machine, loop: loopB, limit: 4, mayMultiplex: true) == "stream")
    }

    @Test func aConnectionClosedInBackoffDoesNotHandItsSlotOnToDial() {
        var machine = Self.machine()
        let conn = Conn()
        _ = acquire(&machine, limit: 2)
        machine.dialled(key, connection: conn, loop: loopA)
        _ = acquire(&machine, limit: 2)
        _ = machine.dialFailed(key, failure: Self.refused)
        #expect(acquire(&machine, limit: 2) == "wait#1")
        #expect(machine.closed(key, connection: conn).handOvers.isEmpty, "the waiter waits for the timer")
        #expect(machine.entries[key]?.waiters.map(\.id) == [1])
    }

    @Test func aStaleTimerDoesNothingAndAnUnusedKeyIsForgottenAfterALapse() throws {
        var machine = Self.machine()
        _ = acquire(&machine)
        let timer = try #require(scheduled(machine.dialFailed(key, failure: Self.refused)))
        #expect(machine.entries[key] != nil, "kept while its timer runs")
        #expect(machine.backoffTimerFired(key, id: timer.id + 7).handOvers.isEmpty)
        // Fired with nothing waiting: the key may dial at once, and a lapse timer is armed.
        let fired = machine.backoffTimerFired(key, id: timer.id)
        let lapse = try #require(scheduled(fired))
        #expect(lapse.delay == .milliseconds(100))
        #expect(machine.backoffTimerFired(key, id: timer.id).backoffTimer == nil, "once")
        _ = machine.backoffTimerFired(key, id: lapse.id)
        #expect(machine.entries[key] == nil, "nobody asked for it meanwhile: forgotten")
    }

    @Test func aRequestAfterTheTimerFiredDialsAtOnceAndItsFailureDoubles() throws {
        var machine = Self.machine()
        _ = acquire(&machine)
        let timer = try #require(scheduled(machine.dialFailed(key, failure: Self.refused)))
        _ = machine.backoffTimerFired(key, id: timer.id)
        #expect(acquire(&machine) == "dial")
        #expect(acquire(&machine) == "wait#1", "one dial at a time while probing")
        #expect(scheduled(machine.dialFailed(key, failure: Self.refused))?.delay == .milliseconds(200))
    }

    @Test func aGuardRefusalBacksNothingOff() {
        var machine = Self.machine()
        #expect(acquire(&machine, limit: 1) == "dial")
        #expect(acquire(&machine, limit: 1) == "wait#1")
        let refused = machine.dialFailed(key, failure: UpstreamPoolStateMachineTests.guardRefusal)
        #expect(refused.backoffTimer == nil)
        #expect(grants(refused) == ["#1 permit"], "its slot goes on, as before")
        #expect(machine.dialFailed(key, failure: UpstreamPoolStateMachineTests.guardRefusal).backoffTimer == nil)
        #expect(acquire(&machine, limit: 1) == "dial")
    }
}

/// The executor carries the machine's backoff timer out on a real (embedded) event loop.
@Suite("Upstream pool dial backoff timers")
struct UpstreamPoolBackoffTimerTests {
    let key = UpstreamPool.Key(digest: "d1", host: "a.test", port: 443, tls: true)

    @Test func aWaiterGetsItsSlotWhenTheTimerFiresAndALaterOneTheFailuresCode() throws {
        let loop = EmbeddedEventLoop()
        let pool = UpstreamPool(dialBackoff: DialBackoff(random: { 0 }))
        var first: UpstreamPool.Lease?
        pool.acquire(key, limit: 4, queueTimeout: .seconds(1), on: loop).assumeIsolated().whenSuccess { first = $0 }
        guard case .permit? = first else { Issue.record("the first request dials"); return }
        pool.dialFailed(key, failure: UpstreamPoolBackoffTests.refused, on: loop)
        var second: Result<UpstreamPool.Lease, any Error>?
        pool.acquire(key, limit: 4, queueTimeout: .seconds(1), on: loop).assumeIsolated().whenComplete { second = $0 }
        loop.advanceTime(by: .milliseconds(99))
        #expect(second == nil, "no dial before the timer")
        loop.advanceTime(by: .milliseconds(1))
        guard case .success(.permit)? = second else { Issue.record("the timer's dial: \(String(describing: second))"); return }
        // That dial fails too; the next request waits 200 ms, longer than its queue_timeout (150 ms).
        pool.dialFailed(key, failure: UpstreamPoolBackoffTests.refused, on: loop)
        var third: Result<UpstreamPool.Lease, any Error>?
        pool.acquire(key, limit: 4, queueTimeout: .milliseconds(150), on: loop).assumeIsolated().whenComplete { third = $0 }
        loop.advanceTime(by: .milliseconds(150))
        guard case .failure(let error as ProxyError)? = third else { Issue.record("refused: \(String(describing: third))"); return }
        #expect(error.code == .connectFailed && error.status == .badGateway)
        #expect(error.detail.contains("queue_timeout (0.15 s)") && error.detail.contains("connection refused"), "\(error.detail)")
        try loop.syncShutdownGracefully()
    }
}
