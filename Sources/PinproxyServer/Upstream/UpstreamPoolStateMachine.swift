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

        /// Slots in use, derived: connections plus dials under way.
        var open: Int { members.count + starting }
        var idleCount: Int { members.filter { if case .idle = $0.state { return true } else { return false } }.count }
    }

    /// What a request gets: a pooled connection, the right to dial one, or a place in line.
    enum Acquisition {
        case lease(Connection)
        /// Open a stream on this HTTP/2 connection (one is counted for it already).
        case stream(Connection)
        case dial
        case wait(id: Int)
    }

    /// What a waiter is handed when a slot frees.
    enum Grant {
        case connection(Connection)
        case stream(Connection)
        case permit
    }

    typealias HandOver = (waiter: Waiter, grant: Grant)

    private(set) var entries: [Key: Entry] = [:]
    /// Digests of the policies now in force; nil until the first reload is seen.
    private var currentDigests: Set<String>?
    private var nextWaiterID = 0

    // MARK: Acquire

    /// Connections that are idle too long or dead (by `isAlive`) are taken
    /// out on the way and returned in `close`.
    /// `mayMultiplex`: the dial may negotiate HTTP/2 (TLS, `upstream_protocol`
    /// not `http1`); then, while a dial is under way and none has said
    /// otherwise, a request waits for that connection's streams rather than
    /// dialling one connection each (a burst would open a connection per request).
    mutating func acquire(_ key: Key, limit: Int, loop: LoopID, now: NIODeadline, maxIdle: TimeAmount,
                          mayMultiplex: Bool = false,
                          isAlive: (Connection) -> Bool) -> (Acquisition, close: [Connection]) {
        // Taken out while it changes: a copy left in the dictionary would make
        // the first change copy the member list (a retain per connection).
        var entry = entries.removeValue(forKey: key) ?? Entry()
        entry.limit = limit
        defer { entries[key] = entry }
        var close: [Connection] = []
        // A busy HTTP/2 connection with room first: fewer connections, no dial.
        if let index = entry.members.firstIndex(where: { $0.loop == loop && $0.streams > 0 && $0.hasRoomForStream }),
           isAlive(entry.members[index].connection) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            return (.stream(entry.members[index].connection), close)
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
                return (.stream(member.connection), close)
            }
            entry.members[index].state = .leased
            return (.lease(member.connection), close)
        }
        if mayMultiplex, entry.multiplexed != false, entry.starting > 0 {
            nextWaiterID += 1
            entry.waiters.append(Waiter(id: nextWaiterID, loop: loop))
            return (.wait(id: nextWaiterID), close)
        }
        if entry.open < limit {
            entry.starting += 1
            return (.dial, close)
        }
        // At the limit, an HTTP/2 connection on another loop with room: a stream there.
        if let index = entry.members.firstIndex(where: { $0.hasRoomForStream }), isAlive(entry.members[index].connection) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            return (.stream(entry.members[index].connection), close)
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

    /// A dial succeeded: its slot is now a leased connection. An HTTP/2
    /// connection (`streams` given: its stream capacity) carries the dialler's
    /// stream, and takes waiters on its loop at once; requests that waited
    /// behind a dial that turned out HTTP/1.1 get slots to dial their own.
    @discardableResult
    mutating func dialled(_ key: Key, connection: Connection, loop: LoopID, streams capacity: Int? = nil) -> [HandOver] {
        var entry = entries[key, default: Entry()]
        entry.starting -= 1
        entry.multiplexed = capacity != nil
        entry.members.append(Member(connection: connection, loop: loop, state: capacity == nil ? .leased : .streaming(1), capacity: capacity))
        entries[key] = entry
        return capacity == nil ? grantPermits(key) : grantStreams(key, connection: connection)
    }

    /// Waiters on the connection's loop get its free streams; the first waiter
    /// on another loop gets a slot to dial (its loop's waiters then ride on that).
    private mutating func grantStreams(_ key: Key, connection: Connection) -> [HandOver] {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }) else { return [] }
        var handOvers: [HandOver] = []
        let loop = entry.members[index].loop
        while entry.members[index].hasRoomForStream, let waiting = entry.waiters.firstIndex(where: { $0.loop == loop }) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            handOvers.append((entry.waiters.remove(at: waiting), .stream(connection)))
        }
        // At the limit, waiters on other loops take the room left rather than wait for a slot.
        while entry.open >= entry.limit, entry.members[index].hasRoomForStream, !entry.waiters.isEmpty {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            handOvers.append((entry.waiters.removeFirst(), .stream(connection)))
        }
        if entry.open < entry.limit {
            // The first waiter on another loop dials there (its loop's waiters
            // then ride on that connection). Waiters left on this loop find it
            // full: one of them dials a second connection, one dial at a time,
            // rather than all waiting for a stream to end while the limit allows more.
            let otherLoop = entry.waiters.firstIndex(where: { $0.loop != loop })
            let thisLoop = entry.starting == 0 ? entry.waiters.indices.first : nil
            if let waiting = otherLoop ?? thisLoop {
                entry.starting += 1
                handOvers.append((entry.waiters.remove(at: waiting), .permit))
            }
        }
        entries[key] = entry
        return handOvers
    }

    /// Free slots to waiters, to dial with (after a dial turned out HTTP/1.1).
    private mutating func grantPermits(_ key: Key) -> [HandOver] {
        guard var entry = entries[key] else { return [] }
        var handOvers: [HandOver] = []
        while entry.open < entry.limit, !entry.waiters.isEmpty {
            entry.starting += 1
            handOvers.append((entry.waiters.removeFirst(), .permit))
        }
        entries[key] = entry
        return handOvers
    }

    /// An HTTP/2 stream ended: its room goes to a waiter on the connection's
    /// loop, else the connection idles (or closes, after GOAWAY).
    mutating func streamEnded(_ key: Key, connection: Connection, now: NIODeadline) -> (handOvers: [HandOver], close: Connection?) {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }) else {
            return ([], nil)  // already gone (closed, retired)
        }
        let member = entry.members[index]
        guard case .streaming(let count) = member.state else {
            preconditionFailure("a stream ended on an upstream connection in state \(member.state)")
        }
        entry.members[index].state = count > 1 ? .streaming(count - 1) : .idle(since: now)
        let current = currentDigests?.contains(key.digest) ?? true
        if count == 1, !current || member.capacity == 0 {
            // Retired by a reload, or the server sent GOAWAY: it goes once empty.
            entry.members.remove(at: index)
            entries[key] = entry
            return (passSlot(key).map { [$0] } ?? [], connection)
        }
        entries[key] = entry
        guard current else { return ([], nil) }
        return (grantStreams(key, connection: connection), nil)
    }

    /// The server sent GOAWAY or lowered SETTINGS_MAX_CONCURRENT_STREAMS: at
    /// most `capacity` streams from now on (0: none, the connection drains and
    /// closes). A raise lets waiters in.
    mutating func streamCapacityChanged(_ key: Key, connection: Connection, to capacity: Int) -> (handOvers: [HandOver], close: Connection?) {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }),
              entry.members[index].capacity != nil else { return ([], nil) }
        // After GOAWAY a later SETTINGS frame cannot reopen it.
        if entry.members[index].capacity == 0 { return ([], nil) }
        entry.members[index].capacity = capacity
        if capacity == 0, entry.members[index].streams == 0 {
            entry.members.remove(at: index)
            entries[key] = entry
            return (passSlot(key).map { [$0] } ?? [], connection)
        }
        entries[key] = entry
        return (grantStreams(key, connection: connection), nil)
    }

    /// A dial failed: its slot goes to the next waiter, or is freed. Requests
    /// that waited behind it for the streams it might have carried get slots
    /// of their own too, up to the limit, as after a dial that turned out
    /// HTTP/1.1: passed on one failed dial at a time, the tail of a burst to a
    /// host that is down would wait out `queue_timeout` instead of getting
    /// its own dial's error.
    mutating func dialFailed(_ key: Key) -> [HandOver] {
        entries[key, default: Entry()].starting -= 1
        guard let first = passSlot(key) else { return [] }
        return [first] + grantPermits(key)
    }

    /// A request is done with `connection`: kept for the next request if it
    /// can serve one (`reusable`, still open, its policy unchanged), else closed.
    mutating func release(_ key: Key, connection: Connection, reusable: Bool, now: NIODeadline)
        -> (handOver: (waiter: Waiter, grant: Grant)?, close: Connection?) {
        // Taken out while it changes (see `acquire`); every way out puts it back.
        guard var entry = entries.removeValue(forKey: key) else { return (nil, nil) }
        guard let index = entry.members.firstIndex(where: { $0.connection === connection }),
              entry.members[index].state == .leased, entry.members[index].capacity == nil else {
            entries[key] = entry
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
        entry.members.append(Member(connection: connection, loop: member.loop, state: .idle(since: now), capacity: nil))
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
