import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// Keep-alive upstream connections per (policy digest, host, port, TLS),
/// bounded by the policy's `max_upstream_connections` across all event loops.
/// Excess requests wait in a queue and fail with `queue_timeout`.
///
/// An idle connection is lent only to a request on its own event loop (a
/// request and its upstream share a loop, so no byte changes threads). When
/// a slot frees and the next waiter is on another loop, the slot, not the
/// connection, is handed over: the waiter dials a fresh one.
final class UpstreamPool: @unchecked Sendable {
    struct Key: Hashable, Sendable, CustomStringConvertible {
        var digest: String
        var host: String
        var port: Int
        var tls: Bool
        var description: String { "\(tls ? "https" : "http")://\(host):\(port) [\(digest.prefix(12))]" }
    }

    /// What `acquire` hands out: a pooled connection, or the right to dial one.
    enum Lease {
        case connection(UpstreamConnection)
        case permit
    }

    enum Membership {
        case active
        case idle(since: Date)
        case gone
    }

    private struct Waiter {
        var id: Int
        var loop: any EventLoop
        var promise: EventLoopPromise<Lease>
        var timeout: Scheduled<Void>?

        func grant(_ lease: Lease) {
            timeout?.cancel()
            promise.succeed(lease)
        }
    }

    private struct Entry {
        var open = 0
        var idle: [UpstreamConnection] = []
        var waiters: [Waiter] = []
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var memberships: [ObjectIdentifier: Membership] = [:]
        /// Digests of the policies now in force; nil until the first reload is seen.
        var currentDigests: Set<String>?
        var nextWaiterID = 0
    }

    private let state = NIOLockedValueBox(State())
    let maxIdleTime: TimeInterval

    init(maxIdleTime: TimeInterval = 60) {
        self.maxIdleTime = maxIdleTime
    }

    // MARK: Acquire

    func acquire(_ key: Key, limit: Int, queueTimeout: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<Lease> {
        let now = Date()
        var stale: [UpstreamConnection] = []
        let immediate: Lease? = state.withLockedValue { state in
            var entry = state.entries[key, default: Entry()]
            defer { state.entries[key] = entry }
            // An idle connection of our own loop, fresh enough and still open.
            while let index = entry.idle.lastIndex(where: { $0.channel.eventLoop === loop }) {
                let connection = entry.idle.remove(at: index)
                let id = ObjectIdentifier(connection)
                if case .idle(let since) = state.memberships[id], connection.isActive, now.timeIntervalSince(since) < maxIdleTime {
                    state.memberships[id] = .active
                    return .connection(connection)
                }
                state.memberships[id] = .gone
                entry.open -= 1
                stale.append(connection)
            }
            if entry.open < limit {
                entry.open += 1
                return .permit
            }
            // At the limit with idle connections only on other loops: retire one, take its slot.
            if let connection = entry.idle.first {
                entry.idle.removeFirst()
                state.memberships[ObjectIdentifier(connection)] = .gone
                stale.append(connection)
                return .permit
            }
            return nil
        }
        stale.forEach { $0.close() }
        if let immediate {
            return loop.makeSucceededFuture(immediate)
        }
        return enqueue(key, queueTimeout: queueTimeout, on: loop)
    }

    private func enqueue(_ key: Key, queueTimeout: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<Lease> {
        let promise = loop.makePromise(of: Lease.self)
        let id = state.withLockedValue { state in
            state.nextWaiterID += 1
            state.entries[key, default: Entry()].waiters.append(Waiter(id: state.nextWaiterID, loop: loop, promise: promise))
            return state.nextWaiterID
        }
        let timeout = loop.scheduleTask(in: queueTimeout) { [weak self] in
            let expired = self?.state.withLockedValue { state -> Bool in
                guard let index = state.entries[key]?.waiters.firstIndex(where: { $0.id == id }) else { return false }
                state.entries[key]!.waiters.remove(at: index)
                return true
            } ?? false
            if expired {
                let seconds = Double(queueTimeout.nanoseconds) / 1e9
                promise.fail(ProxyError(.queueTimeout, host: key.host,
                                        detail: "all upstream connections to \(key.host):\(key.port) stayed busy for \(seconds) s (max_upstream_connections reached)"))
            }
        }
        state.withLockedValue { state in
            if let index = state.entries[key]?.waiters.firstIndex(where: { $0.id == id }) {
                state.entries[key]!.waiters[index].timeout = timeout
            }
        }
        return promise.futureResult
    }

    // MARK: Lifecycle of a connection

    /// A permit's dial succeeded: the connection now holds that slot.
    func opened(_ connection: UpstreamConnection) {
        state.withLockedValue { $0.memberships[ObjectIdentifier(connection)] = .active }
    }

    /// A permit's dial failed: its slot goes to the next waiter, or back.
    func permitReturned(_ key: Key) {
        let grant = state.withLockedValue { state -> Waiter? in
            self.passSlot(key, in: &state)
        }
        grant?.grant(.permit)
    }

    /// A request is done with `connection`; keep it if it can serve another.
    func release(_ connection: UpstreamConnection) {
        let key = connection.key
        var close = false
        let grant: (Waiter, Lease)? = state.withLockedValue { state in
            let id = ObjectIdentifier(connection)
            guard case .active = state.memberships[id] else { return nil }
            let current = state.currentDigests?.contains(key.digest) ?? true
            guard connection.reusable, connection.isActive, current else {
                state.memberships[id] = .gone
                close = true
                return self.passSlot(key, in: &state).map { ($0, .permit) }
            }
            var entry = state.entries[key, default: Entry()]
            defer { state.entries[key] = entry }
            if let index = entry.waiters.firstIndex(where: { $0.loop === connection.channel.eventLoop }) {
                return (entry.waiters.remove(at: index), .connection(connection))
            }
            if !entry.waiters.isEmpty {
                // The next waiter is on another loop: it gets the slot, this connection goes.
                state.memberships[id] = .gone
                close = true
                return (entry.waiters.removeFirst(), .permit)
            }
            state.memberships[id] = .idle(since: Date())
            entry.idle.append(connection)
            return nil
        }
        connection.receiver = nil
        if close { connection.close() }
        grant.map { $0.0.grant($0.1) }
    }

    /// The connection's channel closed (the server hung up, or it failed).
    func closed(_ connection: UpstreamConnection) {
        let key = connection.key
        let grant = state.withLockedValue { state -> Waiter? in
            let id = ObjectIdentifier(connection)
            defer { state.memberships[id] = nil }
            switch state.memberships[id] {
            case .idle:
                state.entries[key]?.idle.removeAll { $0 === connection }
                return self.passSlot(key, in: &state)
            case .active:
                return self.passSlot(key, in: &state)
            case .gone, nil:
                return nil
            }
        }
        grant?.grant(.permit)
    }

    /// Gives a freed slot to the first waiter, or frees it. Call under the lock.
    private func passSlot(_ key: Key, in state: inout State) -> Waiter? {
        guard var entry = state.entries[key] else { return nil }
        defer { state.entries[key] = entry }
        if !entry.waiters.isEmpty {
            return entry.waiters.removeFirst()
        }
        entry.open -= 1
        return nil
    }

    // MARK: Reload

    /// After a policy reload: connections opened under a policy that changed are
    /// retired (idle ones now, busy ones when their request ends).
    func retire(keeping digests: Set<String>) {
        let retired: [UpstreamConnection] = state.withLockedValue { state in
            state.currentDigests = digests
            var retired: [UpstreamConnection] = []
            for (key, var entry) in state.entries where !digests.contains(key.digest) {
                for connection in entry.idle {
                    state.memberships[ObjectIdentifier(connection)] = .gone
                    entry.open -= 1
                    retired.append(connection)
                }
                entry.idle.removeAll()
                state.entries[key] = entry
            }
            return retired
        }
        retired.forEach { $0.close() }
    }

    /// Closes every idle connection (shutdown).
    func closeIdle() {
        let all: [UpstreamConnection] = state.withLockedValue { state in
            var all: [UpstreamConnection] = []
            for (key, var entry) in state.entries {
                for connection in entry.idle { state.memberships[ObjectIdentifier(connection)] = .gone }
                entry.open -= entry.idle.count
                all += entry.idle
                entry.idle.removeAll()
                state.entries[key] = entry
            }
            return all
        }
        all.forEach { $0.close() }
    }
}
