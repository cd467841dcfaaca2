import NIOCore
import Testing

@testable import PinproxyServer

/// Connections parked by the exchange that used them last (`UpstreamParking`):
/// to the pool they are leased, but a request that finds no idle connection
/// takes one rather than dial or wait, and a reload or shutdown closes them
/// as it closes idle ones. A connection in use (its parking not taken) is
/// never lent. Part of the machine's suite, with its key, loops and clock.
extension UpstreamPoolStateMachineTests {
    /// Which connections are parked: `take` as `UpstreamParking.take` does,
    /// once each.
    final class Parked {
        var connections: [Conn] = []
        func take(_ connection: Conn) -> Bool {
            guard let index = connections.firstIndex(where: { $0 === connection }) else { return false }
            connections.remove(at: index)
            return true
        }
    }

    private func acquireParking(_ machine: inout Machine, loop: ObjectIdentifier, limit: Int, parked: Parked,
                                alive: @escaping (Conn) -> Bool = { _ in true }) -> (String, Machine.Action) {
        let action = machine.acquire(key, limit: limit, loop: loop, now: t0, queueTimeout: .seconds(5),
                                     isAlive: alive, reclaim: parked.take)
        switch action.acquisition {
        case .lease(let connection)?:
            // A connection lent is never still parked: its handler could take it back.
            return (parked.connections.contains { $0 === connection } ? "lease of a parked connection" : "lease", action)
        case .stream?: return ("stream", action)
        case .dial?: return ("dial", action)
        case .wait?: return ("wait", action)
        case nil: return ("nothing", action)
        }
    }

    /// `count` connections dialled on `loop` for requests in flight at once,
    /// which then park them.
    private func parkedConnections(_ machine: inout Machine, on loop: ObjectIdentifier, limit: Int, parked: Parked,
                                   count: Int = 1) -> [Conn] {
        let connections = (0..<count).map { _ in
            #expect(acquireParking(&machine, loop: loop, limit: limit, parked: parked).0 == "dial")
            let connection = Conn()
            machine.dialled(key, connection: connection, loop: loop)
            return connection
        }
        parked.connections += connections
        return connections
    }

    private func parkedConnection(_ machine: inout Machine, on loop: ObjectIdentifier, limit: Int, parked: Parked) -> Conn {
        parkedConnections(&machine, on: loop, limit: limit, parked: parked)[0]
    }

    @Test func aRequestOnTheLoopTakesAParkedConnectionRatherThanDial() {
        var machine = Machine()
        let parked = Parked()
        let connection = parkedConnection(&machine, on: loopA, limit: 8, parked: parked)
        let (answer, action) = acquireParking(&machine, loop: loopA, limit: 8, parked: parked)
        #expect(answer == "lease")
        if case .lease(let lent)? = action.acquisition { #expect(lent === connection) }
        #expect(parked.connections.isEmpty, "taken from its parking")
        #expect(machine.entries[key]?.open == 1, "no second connection")
    }

    @Test func aConnectionInUseIsNeitherLentNorClosed() {
        var machine = Machine()
        let parked = Parked()
        _ = parkedConnection(&machine, on: loopA, limit: 1, parked: parked)
        parked.connections = []  // its handler took it back for its next request
        let (answer, action) = acquireParking(&machine, loop: loopA, limit: 1, parked: parked)
        #expect(answer == "wait")
        #expect(action.close.isEmpty)
        // Under the limit the request dials its own.
        #expect(acquireParking(&machine, loop: loopA, limit: 2, parked: parked).0 == "dial")
    }

    @Test func atTheLimitAConnectionParkedOnAnotherLoopIsClosedAndItsSlotDialled() {
        var machine = Machine()
        let parked = Parked()
        let connection = parkedConnection(&machine, on: loopA, limit: 1, parked: parked)
        let (answer, action) = acquireParking(&machine, loop: loopB, limit: 1, parked: parked)
        #expect(answer == "dial", "no wait in line while a connection is free")
        #expect(action.close.count == 1 && action.close[0] === connection)
        #expect(machine.entries[key]?.open == 1, "the slot moved, it was not freed")
        // Under the limit, a request on another loop dials and leaves the parked one alone.
        var roomy = Machine()
        let kept = Parked()
        _ = parkedConnection(&roomy, on: loopA, limit: 2, parked: kept)
        #expect(acquireParking(&roomy, loop: loopB, limit: 2, parked: kept).1.close.isEmpty)
        #expect(kept.connections.count == 1)
    }

    @Test func aParkedConnectionTakenDeadIsClosedAndTheNextIsLent() {
        var machine = Machine()
        let parked = Parked()
        let both = parkedConnections(&machine, on: loopA, limit: 8, parked: parked, count: 2)
        let (dead, live) = (both[0], both[1])
        let (answer, action) = acquireParking(&machine, loop: loopA, limit: 8, parked: parked, alive: { $0 !== dead })
        #expect(answer == "lease")
        if case .lease(let lent)? = action.acquisition { #expect(lent === live) }
        #expect(action.close.count == 1 && action.close[0] === dead)
        #expect(machine.entries[key]?.open == 1)
    }

    @Test func aReloadAndShutdownCloseParkedConnectionsAndLeaveBusyOnes() {
        var machine = Machine()
        let parked = Parked()
        let both = parkedConnections(&machine, on: loopA, limit: 8, parked: parked, count: 2)
        let (idle, busy) = (both[0], both[1])
        parked.connections.removeAll { $0 === busy }  // in use again
        let retired = machine.retire(keeping: ["d2"], reclaim: parked.take).close
        #expect(retired.count == 1 && retired[0] === idle)
        #expect(machine.entries[key]?.open == 1, "the busy one goes when its request ends")

        var other = Machine()
        let atShutdown = Parked()
        let parkedOne = parkedConnection(&other, on: loopB, limit: 8, parked: atShutdown)
        let closed = other.closeIdle(reclaim: atShutdown.take).close
        #expect(closed.count == 1 && closed[0] === parkedOne)
    }

    @Test func parkingIsTakenOnceByWhoeverComesFirst() {
        let parking = UpstreamParking()
        #expect(!parking.take(), "never parked")
        parking.park()
        #expect(parking.take())
        #expect(!parking.take(), "taken already")
    }
}
