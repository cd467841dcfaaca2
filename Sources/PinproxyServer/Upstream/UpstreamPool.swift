import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// Keep-alive upstream connections per (policy digest, host, port, TLS),
/// bounded by the policy's `max_upstream_connections` across all event loops.
/// Excess requests wait in a queue and fail with `queue_timeout`; after a
/// failed dial, a key dials again only when its backoff timer fires. Every
/// decision is `UpstreamPoolStateMachine`'s, made under one lock; this class
/// holds the waiters' promises and the timers, and closes what the machine drops.
final class UpstreamPool: @unchecked Sendable {
    struct Key: Hashable, Sendable, CustomStringConvertible {
        let digest: String
        let host: String
        let port: Int
        let tls: Bool
        /// Connections dialled offering only HTTP/1.1 (for WebSocket upgrades).
        let http1Only: Bool
        /// The digest's hash, taken once: a request looks its key up in the
        /// pool's tables several times, and the digest is 64 characters.
        private let digestHash: Int

        init(digest: String, host: String, port: Int, tls: Bool, http1Only: Bool = false) {
            self.digest = digest
            self.host = host
            self.port = port
            self.tls = tls
            self.http1Only = http1Only
            digestHash = digest.hashValue
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digestHash == rhs.digestHash && lhs.port == rhs.port && lhs.tls == rhs.tls && lhs.http1Only == rhs.http1Only
                && lhs.host == rhs.host && lhs.digest == rhs.digest
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digestHash)
            hasher.combine(host)
            hasher.combine(port)
            hasher.combine(tls)
            hasher.combine(http1Only)
        }

        var description: String { "\(tls ? "https" : "http")://\(host):\(port)\(http1Only ? " http/1.1" : "") [\(digest.prefix(12))]" }
    }

    /// What `acquire` hands out: a pooled connection, or the right to dial one.
    enum Lease {
        case connection(UpstreamConnection)
        /// Open a stream on this HTTP/2 connection (its place is counted already).
        case stream(UpstreamConnection)
        case permit
    }

    private typealias Machine = UpstreamPoolStateMachine<UpstreamConnection>

    /// A request waiting in line: where its answer goes, and its timer.
    private struct Waiting {
        var promise: EventLoopPromise<Lease>
        var timeout: Scheduled<Void>?
        /// Its `queue_timeout`, for the refusal's detail.
        var queueTimeout: TimeAmount
    }

    private struct State {
        var machine: Machine
        var waiting: [Int: Waiting] = [:]
        /// Backoff timers armed, by the machine's timer id (kept to cancel them).
        var backoffTimers: [Int: Scheduled<Void>] = [:]
    }

    private let state: NIOLockedValueBox<State>
    /// Requests looking for a connection: those in line, and one while
    /// `acquire` decides. Set under `state`'s lock; read without it by an
    /// exchange that would park its connection (`park`), which then gives it
    /// back instead. A request says it is looking before it looks for a
    /// parked connection, and a handler parks before it reads this: of the
    /// two, the later sees the other, so no request waits in line for a
    /// connection that sits parked. An atomic, sequentially consistent as
    /// the parking flag is: an exchange that parks reads it once a request,
    /// on every loop, where a lock was written from each.
    private let demand = Atomic(0)

    init(maxIdleTime: TimeAmount = .seconds(60), dialBackoff: DialBackoff = DialBackoff()) {
        state = NIOLockedValueBox(State(machine: Machine(maxIdle: maxIdleTime, dialBackoff: dialBackoff)))
    }

    // MARK: Acquire

    /// A lease now, or a place in line.
    enum Acquired {
        case ready(Lease)
        case queued(EventLoopFuture<Lease>)
    }

    /// A lease for `key` on `loop`: decided at once (a pooled connection, a
    /// stream, a permit to dial) without a future, so the common keep-alive
    /// request allocates no promise and runs no callback chain; or a place in
    /// line, answered by a future that fails with `queue_timeout`.
    func acquireNow(_ key: Key, limit: Int, queueTimeout: TimeAmount, mayMultiplex: Bool = false, on loop: any EventLoop) -> Acquired {
        let now = NIODeadline.now()
        // A waiter's promise is filed under the same lock that puts it in line:
        // a slot freed on another event loop's thread may be handed to it the
        // moment the lock is let go, and a hand-over finding no promise is lost
        // (the request would wait for ever, its queue timer finding no waiter).
        let (action, filed) = state.withLockedValue { state -> (Machine.Action, Filed?) in
            demand.store(state.waiting.count + 1, ordering: .sequentiallyConsistent)
            defer { demand.store(state.waiting.count, ordering: .sequentiallyConsistent) }
            let action = state.machine.acquire(
                key, limit: limit, loop: ObjectIdentifier(loop), now: now, queueTimeout: queueTimeout,
                mayMultiplex: mayMultiplex, isAlive: { $0.isActive }, reclaim: Self.reclaim)
            guard case .wait(let id, let timeout)? = action.acquisition else { return (action, nil) }
            let promise = loop.makePromise(of: Lease.self)
            state.waiting[id] = Waiting(promise: promise, timeout: nil, queueTimeout: timeout)
            return (action, Filed(id: id, promise: promise))
        }
        run(action, key: key, served: [], on: loop)
        switch action.acquisition {
        case .lease(let connection)?:
            return .ready(.connection(connection))
        case .stream(let connection)?:
            return .ready(.stream(connection))
        case .dial?:
            return .ready(.permit)
        case .wait(let id, let timeout)?:
            guard let filed, filed.id == id else { preconditionFailure("a place in line without its promise (waiter \(id))") }
            armQueueTimer(filed, key: key, after: timeout, on: loop)
            return .queued(filed.promise.futureResult)
        case nil:
            preconditionFailure("acquire decided nothing for \(key)")
        }
    }

    private struct Filed {
        var id: Int
        var promise: EventLoopPromise<Lease>
    }

    /// The waiter's `queue_timeout`: when it fires, the machine says whether
    /// the waiter is still in line (then it fails) or was served meanwhile.
    private func armQueueTimer(_ filed: Filed, key: Key, after timeout: TimeAmount, on loop: any EventLoop) {
        // The timer holds the pool strongly (it lives as long as the server,
        // and the timer is cancelled when the waiter is served): a weak
        // capture's side table is reported by LeakSanitizer at exit.
        let timer = loop.scheduleTask(in: timeout) {
            self.event(key) { $0.waiterExpired(key, id: filed.id) }
        }
        let stillWaiting = state.withLockedValue { state -> Bool in
            guard state.waiting[filed.id] != nil else { return false }
            state.waiting[filed.id]!.timeout = timer
            return true
        }
        if !stillWaiting { timer.cancel() }  // served meanwhile
    }

    // MARK: Lifecycle of a connection

    /// A permit's dial succeeded: the connection now holds that slot.
    /// An HTTP/2 connection carries the dialler's stream and takes waiters on its loop.
    func opened(_ connection: UpstreamConnection) {
        event(connection.key) {
            $0.dialled(connection.key, connection: connection, loop: ObjectIdentifier(connection.channel.eventLoop),
                       streams: connection.multiplexer?.maxStreams)
        }
    }

    /// An HTTP/2 connection's stream limit changed (SETTINGS), or it said
    /// GOAWAY (0). The room sessions keep on it comes back first: kept under
    /// the old limit, it could overrun the new one (and after GOAWAY no
    /// stream may start on it).
    func streamCapacityChanged(_ connection: UpstreamConnection, to capacity: Int) {
        if let kept = connection.streamRoom?.takeAll(), kept > 0 { streamEnded(on: connection, count: kept) }
        event(connection.key) { $0.streamCapacityChanged(connection.key, connection: connection, to: capacity) }
    }

    /// A permit's dial failed with `failure` (the request it was made for
    /// gets that refusal): the key goes into backoff, its timer on `loop`,
    /// unless the failure is a policy refusal (then its slot goes on).
    func dialFailed(_ key: Key, failure: ProxyError, on loop: any EventLoop) {
        event(key, on: loop) { $0.dialFailed(key, failure: failure) }
    }

    /// A request is done with its HTTP/1.1 `connection`, and the exchange
    /// handler keeps it for its app connection's next request
    /// (`UpstreamParking`): true. Unless a request is looking for a
    /// connection, or it cannot be kept (closed, an HTTP/2 stream): then it
    /// is released here as `release` does, and the answer is false.
    func park(_ connection: UpstreamConnection) -> Bool {
        guard let parking = connection.parking, connection.reusable, connection.isActive else {
            release(connection)
            return false
        }
        parking.park()
        guard demand.load(ordering: .sequentiallyConsistent) > 0 else { return true }
        // Taken back to release; if the pool took it first, it is that request's.
        if parking.take() { release(connection) }
        return false
    }

    /// A request is done with its HTTP/2 `stream`, and the session that
    /// made it keeps the stream's room on its connection for its next
    /// request (`UpstreamStreamRoom`): true. Unless a request is looking
    /// for a connection, or the room cannot be kept (the stream did not end
    /// both ways, the connection is on another loop, closed or going away):
    /// then the stream is released here as `release` does, and the answer
    /// is false. Called on the stream's loop.
    func keepStreamRoom(_ stream: UpstreamConnection) -> Bool {
        // The loop first: a stream's state and its connection's handler are
        // read only on their loop (one lent across loops is released, which hops).
        guard let connection = stream.parent, let room = connection.streamRoom, connection.channel.eventLoop.inEventLoop,
              stream.isComplete, connection.isActive, connection.multiplexer?.handler.goingAway == false else {
            release(stream)
            return false
        }
        stream.receiver = nil
        room.keep()
        guard demand.load(ordering: .sequentiallyConsistent) > 0 else { return true }
        // Taken back to end; if the pool took it first, it is that request's.
        if room.take() { streamEnded(on: connection) }
        return false
    }

    /// Takes a parked connection, or one room kept on an HTTP/2 connection,
    /// for another request (`Machine.acquire`, `retire`, `closeIdle`).
    private static func reclaim(_ connection: UpstreamConnection) -> Bool {
        connection.parking?.take() ?? connection.streamRoom?.take() ?? false
    }

    /// Takes all the room kept on an HTTP/2 connection (`retire`, `closeIdle`).
    private static func reclaimRoom(_ connection: UpstreamConnection) -> Int {
        connection.streamRoom?.takeAll() ?? 0
    }

    /// A request is done with `connection`; kept if it can serve another.
    /// `idleSince`: when it last served a request, if earlier than now (a
    /// connection parked until its app connection closed: its idle time
    /// counts from its last request, not from its return).
    func release(_ connection: UpstreamConnection, idleSince: NIODeadline? = nil) {
        let now = idleSince ?? NIODeadline.now()
        if let parent = connection.parent {
            // A stream lent to a request on another loop is let go on its own.
            guard connection.channel.eventLoop.inEventLoop else {
                connection.receiver = nil
                connection.channel.eventLoop.execute { self.release(connection) }
                return
            }
            // A stream: unless both its messages ended, it is reset (RST_STREAM);
            // either way its room returns.
            connection.receiver = nil
            if !connection.isComplete { connection.close() }
            streamEnded(on: parent, now: now)
            return
        }
        connection.receiver = nil
        let reusable = connection.reusable && connection.isActive
        event(connection.key) { $0.release(connection.key, connection: connection, reusable: reusable, now: now) }
    }

    /// A stream of this HTTP/2 connection is over (or could not be opened),
    /// or `count` rooms a session kept come back: their room returns.
    func streamEnded(on connection: UpstreamConnection, count: Int = 1, now: NIODeadline = .now()) {
        event(connection.key) { $0.streamEnded(connection.key, connection: connection, ended: count, now: now) }
    }

    /// The connection's channel closed (the server hung up, or it failed).
    func closed(_ connection: UpstreamConnection) {
        event(connection.key) { $0.closed(connection.key, connection: connection) }
    }

    // MARK: Reload and shutdown

    /// After a policy reload: connections opened under a policy that changed are
    /// retired (idle and parked ones now, and HTTP/2 ones whose streams are all
    /// room sessions kept; busy ones when their request ends).
    func retire(keeping digests: Set<String>) {
        event(nil) { $0.retire(keeping: digests, reclaim: Self.reclaim, reclaimRoom: Self.reclaimRoom) }
    }

    /// Closes every idle connection, every parked one, and every HTTP/2
    /// connection that only sessions' kept room holds (shutdown).
    func closeIdle() {
        event(nil) { $0.closeIdle(reclaim: Self.reclaim, reclaimRoom: Self.reclaimRoom) }
    }

    // MARK: The executor

    /// One event: the machine decides under the lock; the waiters it serves
    /// are taken out of line under the same lock (so a waiter's promise and
    /// its place in the machine come and go together); the rest is carried
    /// out after the lock is let go.
    /// `loop`: where a backoff timer the event arms runs.
    private func event(_ key: Key?, on loop: (any EventLoop)? = nil, _ decide: (inout Machine) -> Machine.Action) {
        let (action, served) = state.withLockedValue { state in
            let action = decide(&state.machine)
            let served = (action.handOvers.map(\.waiter) + action.expired.map { $0.waiter }).map { state.waiting.removeValue(forKey: $0.id) }
            if !served.isEmpty { demand.store(state.waiting.count, ordering: .sequentiallyConsistent) }
            return (action, served)
        }
        run(action, key: key, served: served, on: loop)
    }

    /// Carries out an action: close, fail, hand over, arm idle timers, arm
    /// or cancel the backoff timer. (The asking request's own answer is
    /// `acquireNow`'s to return.)
    private func run(_ action: Machine.Action, key: Key?, served: [Waiting?], on loop: (any EventLoop)?) {
        action.close.forEach { $0.close() }
        var waitings = served.makeIterator()
        var handed: [(Waiting?, Machine.Grant)] = []
        for handOver in action.handOvers { handed.append((waitings.next() ?? nil, handOver.grant)) }
        for expiry in action.expired {
            guard let waiting = waitings.next() ?? nil, let key else { continue }
            waiting.promise.fail(Self.expiredRefusal(key: key, queueTimeout: waiting.queueTimeout, lastDialFailure: expiry.lastDialFailure))
        }
        if let timer = action.backoffTimer, let key { runBackoffTimer(timer, key: key, on: loop) }
        handed.forEach { Self.grant($0) }
        for (connection, deadline) in action.idleTimers {
            let key = connection.key
            connection.channel.eventLoop.scheduleTask(deadline: deadline) {
                self.event(key) { $0.idleTimeout(key, connection: connection, now: .now()) }
            }
        }
    }

    /// Why a request that waited out `queue_timeout` is refused: the last
    /// dial's failure while its key is in backoff (its code and status: the
    /// host is down, the pool is not busy), else 503 `queue_timeout`.
    private static func expiredRefusal(key: Key, queueTimeout: TimeAmount, lastDialFailure: ProxyError?) -> ProxyError {
        guard var refusal = lastDialFailure else {
            return ProxyError(.queueTimeout, host: key.host,
                detail: "all upstream connections to \(key.host):\(key.port) stayed busy for \(queueTimeout.seconds) s (max_upstream_connections reached)")
        }
        refusal.detail = "no connection to \(key.host):\(key.port) could be made within queue_timeout (\(queueTimeout.seconds) s); the last dial: \(refusal.detail)"
        return refusal
    }

    private func runBackoffTimer(_ timer: Machine.BackoffTimer, key: Key, on loop: (any EventLoop)?) {
        switch timer {
        case .schedule(let id, let delay):
            guard let loop else { preconditionFailure("a backoff timer for \(key) with no event loop to run it") }
            // Holds the pool strongly, as the queue timer does (see `armQueueTimer`).
            let task = loop.scheduleTask(in: delay) {
                _ = self.state.withLockedValue { $0.backoffTimers.removeValue(forKey: id) }
                self.event(key, on: loop) { $0.backoffTimerFired(key, id: id) }
            }
            // A cancel that came first finds nothing to cancel: the timer then
            // fires into a machine that has moved on, which ignores it.
            state.withLockedValue { $0.backoffTimers[id] = task }
        case .cancel(let id):
            state.withLockedValue { $0.backoffTimers.removeValue(forKey: id) }?.cancel()
        }
    }

    private static func grant(_ handOver: (Waiting?, Machine.Grant)) {
        let (waiting, grant) = handOver
        guard let waiting else {
            // Every waiter in the machine has its promise filed: a hand-over to
            // none would lose the slot and leave a request waiting for ever.
            assertionFailure("an upstream slot was handed to a waiter with no promise")
            return
        }
        waiting.timeout?.cancel()
        switch grant {
        case .connection(let connection): waiting.promise.succeed(.connection(connection))
        case .stream(let connection): waiting.promise.succeed(.stream(connection))
        case .permit: waiting.promise.succeed(.permit)
        }
    }
}
