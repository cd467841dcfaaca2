import NIOCore

/// A connection's life in the pool, after the dial that a `.dial` answer
/// allowed: dialled or failed, streams opening and ending, release, close,
/// GOAWAY and SETTINGS, idle expiry, reload and shutdown. Each event returns
/// one `Action` for the executor.
extension UpstreamPoolStateMachine {
    /// A dial succeeded: its slot is now a leased connection, and backoff, if
    /// any, ends (its timer is cancelled). An HTTP/2 connection (`streams`
    /// given: its stream capacity) carries the dialler's stream, and takes
    /// waiters on its loop at once; requests that waited behind a dial that
    /// turned out HTTP/1.1 (or behind backoff) get slots to dial their own.
    @discardableResult
    mutating func dialled(_ key: Key, connection: Connection, loop: LoopID, streams capacity: Int? = nil) -> Action {
        var entry = entries[key, default: Entry()]
        entry.starting -= 1
        entry.multiplexed = capacity != nil
        entry.members.append(Member(connection: connection, loop: loop, state: capacity == nil ? .leased : .streaming(1), capacity: capacity))
        let timer = entry.backoff.timer
        entry.backoff = .none
        entries[key] = entry
        return Action(handOvers: capacity == nil ? grantPermits(key) : grantStreams(key, connection: connection),
                      backoffTimer: timer.map { .cancel(id: $0) })
    }

    /// A request is done with its HTTP/1.1 `connection`: kept for the next
    /// request if it can serve one (`reusable`, still open, its policy
    /// unchanged), else closed.
    mutating func release(_ key: Key, connection: Connection, reusable: Bool, now: NIODeadline) -> Action {
        guard var entry = entries[key] else { return .none }
        guard let index = entry.members.firstIndex(where: { $0.connection === connection }),
              entry.members[index].state == .leased, entry.members[index].capacity == nil else {
            return .none  // already gone (closed, retired)
        }
        let member = entry.members[index]
        let current = currentDigests?.contains(key.digest) ?? true
        guard reusable, current else {
            entries[key]!.members.remove(at: index)
            return Action(handOvers: passSlot(key).map { [$0] } ?? [], close: [connection])
        }
        // Taken out while it changes (see `acquire`), and put back below.
        entries[key] = nil
        var action = Action()
        if let waiting = entry.waiters.firstIndex(where: { $0.loop == member.loop }) {
            action.handOvers = [(entry.waiters.remove(at: waiting), .connection(connection))]
        } else if !entry.waiters.isEmpty, entry.mayDial {
            // The next waiter is on another loop: it gets the slot, this connection goes.
            entry.members.remove(at: index)
            entry.starting += 1
            action.handOvers = [(entry.waiters.removeFirst(), .permit)]
            action.close = [connection]
        } else {
            // The most recently idled last (an acquire takes the last one). In
            // backoff, a waiter on another loop waits for the backoff timer.
            entry.members.remove(at: index)
            entry.members.append(Member(connection: connection, loop: member.loop, state: .idle(since: now), capacity: nil,
                                        idleTimerArmed: true))
            if !member.idleTimerArmed { action.idleTimers = [(connection, now + maxIdle)] }
        }
        entries[key] = entry
        return action
    }

    /// An HTTP/2 stream ended (`ended` of them: a session gave back the
    /// room it kept, `UpstreamStreamRoom`): its room goes to a waiter on the
    /// connection's loop, else the connection idles (or closes, after GOAWAY
    /// or a reload).
    mutating func streamEnded(_ key: Key, connection: Connection, ended: Int = 1, now: NIODeadline) -> Action {
        // The entry is found once and changed where it lies: each lookup
        // hashes the key, and a copy of the entry taken out and put back
        // copies it twice (issue 33: a microsecond per HTTP/2 stream).
        guard let slot = entries.index(forKey: key),
              let index = entries.values[slot].members.firstIndex(where: { $0.connection === connection }) else {
            return .none  // already gone (closed, retired)
        }
        let member = entries.values[slot].members[index]
        guard case .streaming(let count) = member.state, count >= ended else {
            preconditionFailure("\(ended) stream(s) ended on an upstream connection in state \(member.state)")
        }
        entries.values[slot].members[index].state = count > ended ? .streaming(count - ended) : .idle(since: now)
        let current = currentDigests?.contains(key.digest) ?? true
        if count == ended, !current || member.capacity == 0 {
            // Retired by a reload, or the server sent GOAWAY: it goes once empty.
            entries.values[slot].members.remove(at: index)
            return Action(handOvers: passSlot(key).map { [$0] } ?? [], close: [connection])
        }
        guard current else { return .none }
        var action = Action(handOvers: Self.grantStreams(&entries.values[slot], at: index, connection: connection))
        // Granting removes waiters, never members: `index` is still the connection's.
        if case .idle = entries.values[slot].members[index].state, !entries.values[slot].members[index].idleTimerArmed {
            entries.values[slot].members[index].idleTimerArmed = true
            action.idleTimers = [(connection, now + maxIdle)]
        }
        return action
    }

    /// The server sent GOAWAY or lowered SETTINGS_MAX_CONCURRENT_STREAMS: at
    /// most `capacity` streams from now on (0: none, the connection drains and
    /// closes). A raise lets waiters in.
    mutating func streamCapacityChanged(_ key: Key, connection: Connection, to capacity: Int) -> Action {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }),
              entry.members[index].capacity != nil else { return .none }
        // After GOAWAY a later SETTINGS frame cannot reopen it.
        if entry.members[index].capacity == 0 { return .none }
        entry.members[index].capacity = capacity
        if capacity == 0, entry.members[index].streams == 0 {
            entry.members.remove(at: index)
            entries[key] = entry
            return Action(handOvers: passSlot(key).map { [$0] } ?? [], close: [connection])
        }
        entries[key] = entry
        return Action(handOvers: grantStreams(key, connection: connection))
    }

    /// The connection's channel closed (the server hung up, or it failed).
    mutating func closed(_ key: Key, connection: Connection) -> Action {
        guard let index = entries[key]?.members.firstIndex(where: { $0.connection === connection }) else { return .none }
        entries[key]!.members.remove(at: index)
        return Action(handOvers: passSlot(key).map { [$0] } ?? [])
    }

    /// An idle timer fired: the connection closes if it has been idle for
    /// `maxIdle`; idled again since, the timer is re-armed for the rest; in
    /// use, it is disarmed (its next idle time arms one).
    mutating func idleTimeout(_ key: Key, connection: Connection, now: NIODeadline) -> Action {
        guard var entry = entries[key], let index = entry.members.firstIndex(where: { $0.connection === connection }) else {
            return .none  // closed or retired meanwhile
        }
        guard case .idle(let since) = entry.members[index].state else {
            entry.members[index].idleTimerArmed = false
            entries[key] = entry
            return .none
        }
        if now - since < maxIdle {
            return Action(idleTimers: [(connection, since + maxIdle)])
        }
        entry.members.remove(at: index)
        entries[key] = entry
        forgetIfEmpty(key)
        return Action(close: [connection])
    }

    // MARK: Reload and shutdown

    /// After a policy reload: idle connections opened under a policy that
    /// changed go now; leased ones when their request ends.
    /// Parked connections (`reclaim`, see `acquire`) go with the idle ones,
    /// and so does the room sessions keep on HTTP/2 connections
    /// (`reclaimRoom`: takes it all, and says how many streams it was).
    mutating func retire(keeping digests: Set<String>, reclaim: (Connection) -> Bool = { _ in false },
                         reclaimRoom: (Connection) -> Int = { _ in 0 }) -> Action {
        currentDigests = digests
        var action = Action()
        for key in entries.keys where !digests.contains(key.digest) {
            action.close += takeIdle(key, reclaim: reclaim, reclaimRoom: reclaimRoom)
        }
        return action
    }

    /// Every idle connection, and every parked one, taken out (shutdown);
    /// an HTTP/2 connection whose open streams were all kept room, too.
    mutating func closeIdle(reclaim: (Connection) -> Bool = { _ in false }, reclaimRoom: (Connection) -> Int = { _ in 0 }) -> Action {
        Action(close: entries.keys.flatMap { takeIdle($0, reclaim: reclaim, reclaimRoom: reclaimRoom) })
    }

    // MARK: Hand-overs

    /// Waiters on the connection's loop get its free streams; the first waiter
    /// on another loop gets a slot to dial (its loop's waiters then ride on that).
    private mutating func grantStreams(_ key: Key, connection: Connection) -> [HandOver] {
        guard let slot = entries.index(forKey: key),
              let index = entries.values[slot].members.firstIndex(where: { $0.connection === connection }) else { return [] }
        return Self.grantStreams(&entries.values[slot], at: index, connection: connection)
    }

    /// The same, on the entry where it lies, for its member at `index`.
    private static func grantStreams(_ entry: inout Entry, at index: Int, connection: Connection) -> [HandOver] {
        // The common stream's end finds nobody waiting: no list is made.
        guard !entry.waiters.isEmpty else { return [] }
        var handOvers: [HandOver] = []
        let loop = entry.members[index].loop
        while entry.members[index].hasRoomForStream, let waiting = entry.waiters.firstIndex(where: { $0.loop == loop }) {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            handOvers.append((entry.waiters.remove(at: waiting), .stream(connection)))
        }
        // At the limit (or in backoff), waiters on other loops take the room left rather than wait for a slot.
        while entry.open >= entry.limit || !entry.mayDial, entry.members[index].hasRoomForStream, !entry.waiters.isEmpty {
            entry.members[index].state = .streaming(entry.members[index].streams + 1)
            handOvers.append((entry.waiters.removeFirst(), .stream(connection)))
        }
        if entry.open < entry.limit, entry.mayDial {
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
        return handOvers
    }

    /// Free slots to waiters, to dial with (after a dial turned out HTTP/1.1).
    mutating func grantPermits(_ key: Key) -> [HandOver] {
        guard var entry = entries[key] else { return [] }
        var handOvers: [HandOver] = []
        while entry.open < entry.limit, entry.mayDial, !entry.waiters.isEmpty {
            entry.starting += 1
            handOvers.append((entry.waiters.removeFirst(), .permit))
        }
        entries[key] = entry
        return handOvers
    }

    /// Gives a freed slot to the first waiter (who dials), or lets it go (in
    /// backoff, waiters wait for the backoff timer).
    mutating func passSlot(_ key: Key) -> HandOver? {
        guard var entry = entries[key], !entry.waiters.isEmpty, entry.mayDial else {
            forgetIfEmpty(key)
            return nil
        }
        entry.starting += 1
        let waiter = entry.waiters.removeFirst()
        entries[key] = entry
        return (waiter, .permit)
    }


    /// A key with no connection, dial or waiter is forgotten, unless its
    /// backoff timer is armed (its firing forgets it, see `+Backoff`).
    mutating func forgetIfEmpty(_ key: Key) {
        if let entry = entries[key], entry.open == 0, entry.waiters.isEmpty, entry.backoff.timer == nil { entries[key] = nil }
    }

    /// The key's idle connections, those `reclaim` takes from their
    /// parking, and HTTP/2 connections whose streams were all room kept
    /// (`reclaimRoom` takes it back; one with streams left keeps the rest),
    /// taken out.
    private mutating func takeIdle(_ key: Key, reclaim: (Connection) -> Bool, reclaimRoom: (Connection) -> Int) -> [Connection] {
        guard var entry = entries[key] else { return [] }
        var taken: [Connection] = []
        var index = 0
        while index < entry.members.count {
            let member = entry.members[index]
            let free: Bool
            switch member.state {
            case .idle:
                free = true
            case .leased:
                free = member.capacity == nil && reclaim(member.connection)
            case .streaming(let count):
                let kept = reclaimRoom(member.connection)
                free = kept >= count
                if !free { entry.members[index].state = .streaming(count - kept) }
            }
            if free {
                taken.append(entry.members.remove(at: index).connection)
            } else {
                index += 1
            }
        }
        entries[key] = entry
        return taken
    }
}
