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
struct UpstreamPoolStateMachine<Connection: AnyObject> {
    typealias Key = UpstreamPool.Key
    typealias LoopID = ObjectIdentifier

    enum ConnectionState: Equatable {
        case leased
        case idle(since: NIODeadline)
    }

    struct Member {
        var connection: Connection
        var loop: LoopID
        var state: ConnectionState
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

        /// Slots in use, derived: connections plus dials under way.
        var open: Int { members.count + starting }
        var idleCount: Int { members.filter { if case .idle = $0.state { return true } else { return false } }.count }
    }

    /// What a request gets: a pooled connection, the right to dial one, or a place in line.
    enum Acquisition {
        case lease(Connection)
        case dial
        case wait(id: Int)
    }

    /// What a waiter is handed when a slot frees.
    enum Grant {
        case connection(Connection)
        case permit
    }

    private(set) var entries: [Key: Entry] = [:]
    /// Digests of the policies now in force; nil until the first reload is seen.
    private var currentDigests: Set<String>?
    private var nextWaiterID = 0

    // MARK: Acquire

    /// Connections that are idle too long or dead (by `isAlive`) are taken
    /// out on the way and returned in `close`.
    mutating func acquire(_ key: Key, limit: Int, loop: LoopID, now: NIODeadline, maxIdle: TimeAmount,
                          isAlive: (Connection) -> Bool) -> (Acquisition, close: [Connection]) {
        var entry = entries[key, default: Entry()]
        defer { entries[key] = entry }
        var close: [Connection] = []
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
            entry.members[index].state = .leased
            return (.lease(member.connection), close)
        }
        if entry.open < limit {
            entry.starting += 1
            return (.dial, close)
        }
        // At the limit with idle connections only on other loops: retire one, take its slot.
        if let index = entry.members.firstIndex(where: { if case .idle = $0.state { return true } else { return false } }) {
            close.append(entry.members.remove(at: index).connection)
            entry.starting += 1
            return (.dial, close)
        }
        nextWaiterID += 1
        entry.waiters.append(Waiter(id: nextWaiterID, loop: loop))
        return (.wait(id: nextWaiterID), close)
    }

    /// A waiter's `queue_timeout` ran out: true when it was still waiting.
    mutating func waiterExpired(_ key: Key, id: Int) -> Bool {
        guard let index = entries[key]?.waiters.firstIndex(where: { $0.id == id }) else { return false }
        entries[key]!.waiters.remove(at: index)
        return true
    }

    // MARK: A connection's life

    /// A dial succeeded: its slot is now a leased connection.
    mutating func dialled(_ key: Key, connection: Connection, loop: LoopID) {
        entries[key, default: Entry()].starting -= 1
        entries[key, default: Entry()].members.append(Member(connection: connection, loop: loop, state: .leased))
    }

    /// A dial failed: its slot goes to the next waiter, or is freed.
    mutating func dialFailed(_ key: Key) -> (waiter: Waiter, grant: Grant)? {
        entries[key, default: Entry()].starting -= 1
        return passSlot(key)
    }

    /// A request is done with `connection`: kept for the next request if it
    /// can serve one (`reusable`, still open, its policy unchanged), else closed.
    mutating func release(_ key: Key, connection: Connection, reusable: Bool, now: NIODeadline)
        -> (handOver: (waiter: Waiter, grant: Grant)?, close: Connection?) {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }),
              entry.members[index].state == .leased else {
            return (nil, nil)  // already gone (closed, retired)
        }
        let member = entry.members[index]
        let current = currentDigests?.contains(key.digest) ?? true
        guard reusable, current else {
            entry.members.remove(at: index)
            entries[key] = entry
            return (passSlot(key), connection)
        }
        if let waiting = entry.waiters.firstIndex(where: { $0.loop == member.loop }) {
            let waiter = entry.waiters.remove(at: waiting)
            entries[key] = entry
            return ((waiter, .connection(connection)), nil)
        }
        if !entry.waiters.isEmpty {
            // The next waiter is on another loop: it gets the slot, this connection goes.
            entry.members.remove(at: index)
            let waiter = entry.waiters.removeFirst()
            entry.starting += 1
            entries[key] = entry
            return ((waiter, .permit), connection)
        }
        entry.members.remove(at: index)
        entry.members.append(Member(connection: connection, loop: member.loop, state: .idle(since: now)))
        entries[key] = entry
        return (nil, nil)
    }

    /// The connection's channel closed (the server hung up, or it failed).
    mutating func closed(_ key: Key, connection: Connection) -> (waiter: Waiter, grant: Grant)? {
        guard let index = entries[key]?.members.firstIndex(where: { $0.connection === connection }) else { return nil }
        entries[key]!.members.remove(at: index)
        return passSlot(key)
    }

    /// Gives a freed slot to the first waiter (who dials), or lets it go.
    private mutating func passSlot(_ key: Key) -> (waiter: Waiter, grant: Grant)? {
        guard var entry = entries[key], !entry.waiters.isEmpty else {
            if let entry = entries[key], entry.open == 0, entry.waiters.isEmpty { entries[key] = nil }
            return nil
        }
        let waiter = entry.waiters.removeFirst()
        entry.starting += 1
        entries[key] = entry
        return (waiter, .permit)
    }

    // MARK: Reload and shutdown

    /// After a policy reload: idle connections opened under a policy that
    /// changed go now; leased ones when their request ends.
    mutating func retire(keeping digests: Set<String>) -> [Connection] {
        currentDigests = digests
        var retired: [Connection] = []
        for key in entries.keys where !digests.contains(key.digest) {
            retired += takeIdle(key)
        }
        return retired
    }

    /// Every idle connection, taken out (shutdown).
    mutating func closeIdle() -> [Connection] {
        entries.keys.flatMap { takeIdle($0) }
    }

    private mutating func takeIdle(_ key: Key) -> [Connection] {
        guard var entry = entries[key] else { return [] }
        let idle = entry.members.filter { if case .idle = $0.state { return true } else { return false } }
        entry.members.removeAll { if case .idle = $0.state { return true } else { return false } }
        entries[key] = entry
        return idle.map(\.connection)
    }
}
