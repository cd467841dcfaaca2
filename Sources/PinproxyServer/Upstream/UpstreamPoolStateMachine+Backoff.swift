import NIOCore

/// Dial backoff (docs/contract.md §10, "Dial backoff"), after
/// AsyncHTTPClient's `HTTPConnectionPool`: a failed dial fails the request it
/// was made for, and its key dials nothing more until the machine's backoff
/// timer fires; requests that no existing connection can serve wait in line
/// meanwhile. When the timer fires, one dial is made for the line; it failing
/// too doubles the next delay (`DialBackoff`), it succeeding ends backoff.
/// Without this, every queued and every new request to a host that is down
/// dials it again at once: a dial storm, with nothing to say when to stop.
extension UpstreamPoolStateMachine {
    enum Backoff {
        case none
        /// `failures` dials failed in a row, the last with `last`: nothing is
        /// dialled until timer `timer` fires.
        case waiting(failures: Int, last: ProxyError, timer: Int)
        /// The timer fired: one dial at a time (`Entry.mayDial`) until one
        /// succeeds. `lapse`: a timer armed when nothing was left to dial for;
        /// if the key still holds nothing when it fires, it is forgotten (so a
        /// host that stays down and is no longer asked for costs no memory).
        case probing(failures: Int, last: ProxyError, lapse: Int?)

        /// The failure a request that waited out `queue_timeout` reports.
        var lastFailure: ProxyError? {
            switch self {
            case .none: return nil
            case .waiting(_, let last, _), .probing(_, let last, _): return last
            }
        }

        /// The timer armed for this state, if any.
        var timer: Int? {
            switch self {
            case .none: return nil
            case .waiting(_, _, let timer): return timer
            case .probing(_, _, let lapse): return lapse
            }
        }
    }

    /// What the executor does with the key's backoff timer.
    enum BackoffTimer: Equatable {
        /// Arm timer `id`: after `after`, it reports `backoffTimerFired(key, id:)`.
        case schedule(id: Int, after: TimeAmount)
        case cancel(id: Int)
    }

    /// A dial failed with `failure` (already told to the request it was made
    /// for). A failure of the upstream puts the key into backoff, or doubles
    /// it if it was probing; one reported while the timer runs (a dial begun
    /// before the first failure) is only remembered. A policy refusal (the
    /// SSRF guard) backs nothing off: its slot goes on as before.
    mutating func dialFailed(_ key: Key, failure: ProxyError) -> Action {
        var entry = entries.removeValue(forKey: key) ?? Entry()
        entry.starting -= 1
        guard DialBackoff.backsOff(after: failure.code) else {
            entries[key] = entry
            switch entry.backoff {
            case .none:
                // Requests that waited for this dial's streams dial their own,
                // each getting its own refusal rather than `queue_timeout`.
                guard let first = passSlot(key) else { return .none }
                return Action(handOvers: [first] + grantPermits(key))
            case .waiting:
                return .none
            case .probing:
                // That dial learnt nothing of the upstream: the next one goes.
                let action = probe(key)
                forgetIfEmpty(key)
                return action
            }
        }
        var action = Action()
        switch entry.backoff {
        case .none:
            action.backoffTimer = arm(&entry, failures: 1, last: failure)
        case .probing(let failures, _, _):
            // A lapse timer, if armed, finds the state changed and does nothing.
            action.backoffTimer = arm(&entry, failures: failures + 1, last: failure)
        case .waiting(let failures, _, let timer):
            entry.backoff = .waiting(failures: failures, last: failure, timer: timer)
        }
        entries[key] = entry
        return action
    }

    /// The key's backoff timer `id` fired (a stale one does nothing). With
    /// requests in line, one of them gets a slot to dial; with none, the next
    /// request dials at once; and a lapse timer finding the key unused
    /// forgets it.
    mutating func backoffTimerFired(_ key: Key, id: Int) -> Action {
        guard var entry = entries[key], entry.backoff.timer == id else { return .none }
        let unused = entry.open == 0 && entry.waiters.isEmpty
        switch entry.backoff {
        case .none:
            return .none
        case .waiting(let failures, let last, _):
            var action = Action()
            if unused {
                nextTimerID += 1
                entry.backoff = .probing(failures: failures, last: last, lapse: nextTimerID)
                action.backoffTimer = .schedule(id: nextTimerID, after: dialBackoff.delay(afterFailures: failures))
            } else {
                entry.backoff = .probing(failures: failures, last: last, lapse: nil)
            }
            entries[key] = entry
            var probing = probe(key)
            probing.backoffTimer = action.backoffTimer
            return probing
        case .probing(let failures, let last, _):
            if unused {
                entries[key] = nil
            } else {
                entry.backoff = .probing(failures: failures, last: last, lapse: nil)
                entries[key] = entry
            }
            return .none
        }
    }

    /// Puts the key into backoff after `failures` failed dials: timer armed.
    private mutating func arm(_ entry: inout Entry, failures: Int, last: ProxyError) -> BackoffTimer {
        nextTimerID += 1
        entry.backoff = .waiting(failures: failures, last: last, timer: nextTimerID)
        return .schedule(id: nextTimerID, after: dialBackoff.delay(afterFailures: failures))
    }

    /// One dial for the line, if backoff allows one now: the first waiter
    /// gets a free slot, or, at the limit, the slot of an idle connection on
    /// another loop, which closes (as `acquire` does).
    private mutating func probe(_ key: Key) -> Action {
        guard var entry = entries[key], entry.mayDial, !entry.waiters.isEmpty else { return .none }
        var action = Action()
        if entry.open >= entry.limit {
            guard let index = entry.members.firstIndex(where: { if case .idle = $0.state { return true } else { return false } }) else {
                return .none  // every slot busy: the next one freed is passed on (`passSlot`)
            }
            action.close = [entry.members.remove(at: index).connection]
        }
        entry.starting += 1
        action.handOvers = [(entry.waiters.removeFirst(), .permit)]
        entries[key] = entry
        return action
    }
}
