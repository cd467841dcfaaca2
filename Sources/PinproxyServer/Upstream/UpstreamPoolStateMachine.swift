import NIOCore

/// The keep-alive pool's bookkeeping as a value: per key (policy digest,
/// host, port, TLS), each connection is `leased` or `idle(since:)` on a
/// monotonic clock, dials under way are `starting` permits, and requests
/// past `max_upstream_connections` wait in line. How many connections a key
/// holds is derived from those, never kept by hand. No I/O, no locks, no
/// clock: `UpstreamPool` runs it under its lock and carries out what it says.
///
/// An idle connection is lent only to a request on its own event loop (a
/// request and its upstream share a loop, so no byte changes threads). When
/// a slot frees and the next waiter is on another loop, the slot, not the
/// connection, is handed over: the waiter dials a fresh one.
///
/// An HTTP/2 connection (docs/contract.md §11) is one member too, so
/// `max_upstream_connections` still counts connections; it carries up to
/// `capacity` streams at once (the server's SETTINGS_MAX_CONCURRENT_STREAMS)
/// and is `streaming(n)` while it does. A request leases a stream on it, and
/// one that finds every stream busy waits in the same line. At the limit, an
/// HTTP/2 connection with room serves a request from any loop (its stream
/// then hops loops, see `UpstreamConnection.receiver`): a slot the limit
/// forbids to dial must not turn away a request that a free stream can carry.
///
/// An HTTP/1.1 connection an exchange handler keeps between its app
/// connection's requests (`UpstreamParking`) stays `leased` here; a request
/// that finds no idle connection takes it from its parking (`reclaim`)
/// before it dials or waits, and a reload or shutdown closes it with the
/// idle ones.
///
/// A dial that fails puts its key into backoff (`+Backoff`): no dial until
/// the machine's backoff timer fires, then one at a time until one succeeds.
struct UpstreamPoolStateMachine<Connection: AnyObject> {
    typealias Key = UpstreamPool.Key
    typealias LoopID = ObjectIdentifier

    enum ConnectionState: Equatable {
        /// HTTP/1.1: lent to one request.
        case leased
        case idle(since: NIODeadline)
        /// HTTP/2: this many streams open (at least one).
        case streaming(Int)
    }

    struct Member {
        var connection: Connection
        var loop: LoopID
        var state: ConnectionState
        /// HTTP/2: how many streams it may carry at once (0 after GOAWAY); nil: HTTP/1.1.
        var capacity: Int? = nil
        /// An idle timer is armed for it. One at a time: a keep-alive request
        /// that leases and releases it schedules nothing; the timer, when it
        /// fires on a connection idled again since, is re-armed for the rest.
        var idleTimerArmed = false

        var streams: Int {
            switch state {
            case .streaming(let count): return count
            case .leased, .idle: return 0
            }
        }

        /// An HTTP/2 connection that can take another stream now.
        var hasRoomForStream: Bool {
            guard let capacity else { return false }
            return streams < capacity
        }
    }

    struct Waiter: Equatable {
        var id: Int
        var loop: LoopID
    }

    struct Entry {
        /// Every connection the key holds, leased or idle, in the order they
        /// became what they are (the most recently idled last).
        var members: [Member] = []
        /// Dials under way: each holds a slot.
        var starting = 0
        var waiters: [Waiter] = []
        /// What the last dial negotiated: true for HTTP/2; nil before any.
        var multiplexed: Bool?
        /// The key's `max_upstream_connections`, as the last request gave it.
        var limit = Int.max
        /// Dials held back after failures (see `+Backoff`).
        var backoff: Backoff = .none

        /// A dial may start now, as far as backoff goes: none while its
        /// timer runs, one at a time once it has fired.
        var mayDial: Bool {
            switch backoff {
            case .none: return true
            case .waiting: return false
            case .probing: return starting == 0
            }
        }

        /// Slots in use, derived: connections plus dials under way.
        var open: Int { members.count + starting }
        var idleCount: Int { members.filter { if case .idle = $0.state { return true } else { return false } }.count }
    }

    /// What the asking request gets (`acquire` only): a pooled connection, a
    /// stream, the right to dial one, or a place in line whose `queue_timeout`
    /// timer the executor arms (the waiter's timer is cancelled when it is
    /// handed something, and reports `waiterExpired` when it fires).
    enum Acquisition {
        case lease(Connection)
        /// Open a stream on this HTTP/2 connection (one is counted for it already).
        case stream(Connection)
        case dial
        case wait(id: Int, timeout: TimeAmount)
    }

    /// What a waiter is handed when a slot frees.
    enum Grant {
        case connection(Connection)
        case stream(Connection)
        case permit
    }

    typealias HandOver = (waiter: Waiter, grant: Grant)

    /// Everything one event asks of the pool, in one shape: the executor
    /// (`UpstreamPool`) carries it out after the lock is let go, in this
    /// order: close, fail, hand over, arm idle timers, answer.
    struct Action {
        /// For the request that asked (`acquire`); nil after any other event.
        var acquisition: Acquisition?
        /// Waiters served now, each with what it gets.
        var handOvers: [HandOver] = []
        /// Waiters whose `queue_timeout` ran out: each fails with 503
        /// `queue_timeout`, or, while its key is in backoff, with the last
        /// dial's failure (its code and status).
        var expired: [(waiter: Waiter, lastDialFailure: ProxyError?)] = []
        /// Connections to close: idle too long, dead, retired by a reload,
        /// drained after GOAWAY, or not reusable.
        var close: [Connection] = []
        /// Idle connections that need a timer: it fires at `at` and reports
        /// `idleTimeout` (see `Member.idleTimerArmed`).
        var idleTimers: [(connection: Connection, at: NIODeadline)] = []
        /// The key's backoff timer to arm (it reports `backoffTimerFired`) or to cancel.
        var backoffTimer: BackoffTimer?

        static var none: Action { Action() }
    }

    /// Changed only by the machine itself (this file and its `+Connections` extension).
    var entries: [Key: Entry] = [:]
    /// Digests of the policies now in force; nil until the first reload is seen.
    var currentDigests: Set<String>?
    var nextWaiterID = 0
    /// How long a connection may sit idle before it is closed (`idle_timeout`).
    let maxIdle: TimeAmount
    /// The delays between dials after failures, with their jitter.
    let dialBackoff: DialBackoff
    var nextTimerID = 0

    init(maxIdle: TimeAmount = .seconds(60), dialBackoff: DialBackoff = DialBackoff()) {
        self.maxIdle = maxIdle
        self.dialBackoff = dialBackoff
    }

    // MARK: Acquire

    /// A request for `key` on `loop`. Connections that are idle too long or
    /// dead (by `isAlive`) are taken out on the way and closed.
    /// `mayMultiplex`: the dial may negotiate HTTP/2 (TLS, `upstream_protocol`
    /// not `http1`, no upgrade); then, while a dial is under way and none has
    /// said otherwise, a request waits for that connection's streams rather
    /// than dialling one connection each (a burst would open a connection per
    /// request: "the first dial may be h2").
    /// `reclaim`: takes a leased HTTP/1.1 connection from the exchange
    /// handler that parked it (`UpstreamParking`), or one room of an HTTP/2
    /// connection from the session that keeps it (`UpstreamStreamRoom`);
    /// false when it is in use.
    mutating func acquire(_ key: Key, limit: Int, loop: LoopID, now: NIODeadline, queueTimeout: TimeAmount,
                          mayMultiplex: Bool = false,
                          isAlive: (Connection) -> Bool, reclaim: (Connection) -> Bool = { _ in false }) -> Action {
        // Taken out while it changes: a copy left in the dictionary would make
        // the first change copy the member list (a retain per connection).
        var entry = entries.removeValue(forKey: key) ?? Entry()
        entry.limit = limit
        defer { entries[key] = entry }
        var action = Action()
        action.acquisition = decide(&entry, loop: loop, now: now, queueTimeout: queueTimeout, mayMultiplex: mayMultiplex,
                                    isAlive: isAlive, reclaim: reclaim, closing: &action.close)
        return action
    }

    private mutating func decide(_ entry: inout Entry, loop: LoopID, now: NIODeadline, queueTimeout: TimeAmount,
                                 mayMultiplex: Bool, isAlive: (Connection) -> Bool, reclaim: (Connection) -> Bool,
                                 closing close: inout [Connection]) -> Acquisition {
        // A busy HTTP/2 connection with room first: fewer connections, no dial.
        if let index = entry.members.firstIndex(where: { $0.loop == loop && $0.streams > 0 && $0.hasRoomForStream }),
           isAlive(entry.members[index].connection) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            return .stream(entry.members[index].connection)
        }
        while let index = entry.members.lastIndex(where: { member in
            if case .idle = member.state { return member.loop == loop }
            return false
        }) {
            let member = entry.members[index]
            guard case .idle(let since) = member.state, now - since < maxIdle, isAlive(member.connection) else {
                entry.members.remove(at: index)
                close.append(member.connection)
                continue
            }
            if member.capacity != nil {
                guard member.hasRoomForStream else {
                    entry.members.remove(at: index)  // drained after GOAWAY
                    close.append(member.connection)
                    continue
                }
                entry.members[index].state = .streaming(1)
                return .stream(member.connection)
            }
            entry.members[index].state = .leased
            return .lease(member.connection)
        }
        // A full connection of this loop, some of whose room a session keeps
        // (`UpstreamStreamRoom`): a kept room taken from it, and its count
        // stays (the room is this request's now), rather than a dial or a
        // wait while the server would take the stream.
        if let index = takeKeptRoom(entry, on: loop, reclaim: reclaim), isAlive(entry.members[index].connection) {
            return .stream(entry.members[index].connection)
        }
        // A connection parked on this loop by the exchange that used it last:
        // taken from it, as an idle one is lent (it stays leased, now to this
        // request), rather than a dial for a connection that is free.
        if let index = takeParked(&entry, on: loop, isAlive: isAlive, reclaim: reclaim, closing: &close) {
            return .lease(entry.members[index].connection)
        }
        if mayMultiplex, entry.multiplexed != false, entry.starting > 0 {
            return enqueue(&entry, loop: loop, queueTimeout: queueTimeout)
        }
        if entry.open < entry.limit, entry.mayDial {
            entry.starting += 1
            return .dial
        }
        // At the limit (or in backoff), an HTTP/2 connection on another loop with room: a stream there.
        if let index = entry.members.firstIndex(where: { $0.hasRoomForStream }), isAlive(entry.members[index].connection) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            return .stream(entry.members[index].connection)
        }
        // The same with room kept on another loop's connection.
        if let index = takeKeptRoom(entry, on: nil, reclaim: reclaim), isAlive(entry.members[index].connection) {
            return .stream(entry.members[index].connection)
        }
        // At the limit with idle connections only on other loops: retire one, take its slot.
        if entry.mayDial, let index = entry.members.firstIndex(where: { if case .idle = $0.state { return true } else { return false } }) {
            close.append(entry.members.remove(at: index).connection)
            entry.starting += 1
            return .dial
        }
        // The same for a connection parked on another loop: nobody waits in
        // line while a connection is free.
        if entry.mayDial, let index = takeParked(&entry, on: nil, isAlive: isAlive, reclaim: reclaim, closing: &close) {
            close.append(entry.members.remove(at: index).connection)
            entry.starting += 1
            return .dial
        }
        return enqueue(&entry, loop: loop, queueTimeout: queueTimeout)
    }

    /// The index of the first leased HTTP/1.1 connection (on `loop`; on any
    /// loop when nil) that `reclaim` takes from its parking and that is still
    /// alive. One taken dead is taken out and closed, and the search goes on.
    private func takeParked(_ entry: inout Entry, on loop: LoopID?, isAlive: (Connection) -> Bool, reclaim: (Connection) -> Bool,
                    closing close: inout [Connection]) -> Int? {
        var index = 0
        while index < entry.members.count {
            let member = entry.members[index]
            guard member.state == .leased, member.capacity == nil, loop == nil || member.loop == loop, reclaim(member.connection) else {
                index += 1
                continue
            }
            guard isAlive(member.connection) else {
                close.append(entry.members.remove(at: index).connection)
                continue
            }
            return index
        }
        return nil
    }

    /// The index of the first HTTP/2 connection (on `loop`; on any loop when
    /// nil) from which `reclaim` takes one room a session keeps. A room kept
    /// is counted as a stream, so only a connection with streams has one.
    private func takeKeptRoom(_ entry: Entry, on loop: LoopID?, reclaim: (Connection) -> Bool) -> Int? {
        entry.members.firstIndex { member in
            member.capacity != nil && member.streams > 0 && (loop == nil || member.loop == loop) && reclaim(member.connection)
        }
    }

    private mutating func enqueue(_ entry: inout Entry, loop: LoopID, queueTimeout: TimeAmount) -> Acquisition {
        nextWaiterID += 1
        entry.waiters.append(Waiter(id: nextWaiterID, loop: loop))
        return .wait(id: nextWaiterID, timeout: queueTimeout)
    }

    /// A waiter's `queue_timeout` timer fired: it fails, unless it was served
    /// meanwhile; with the last dial's failure if its key is in backoff (a
    /// host that is down is told as such, not as a busy pool).
    mutating func waiterExpired(_ key: Key, id: Int) -> Action {
        guard let index = entries[key]?.waiters.firstIndex(where: { $0.id == id }) else { return .none }
        var action = Action()
        action.expired = [(entries[key]!.waiters.remove(at: index), entries[key]!.backoff.lastFailure)]
        forgetIfEmpty(key)
        return action
    }
}
