import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// Keep-alive upstream connections per (policy digest, host, port, TLS),
/// bounded by the policy's `max_upstream_connections` across all event loops.
/// Excess requests wait in a queue and fail with `queue_timeout`. Every
/// decision is `UpstreamPoolStateMachine`'s, made under one lock; this class
/// holds the waiters' promises and timers and closes what the machine drops.
final class UpstreamPool: @unchecked Sendable {
    struct Key: Hashable, Sendable, CustomStringConvertible {
        var digest: String
        var host: String
        var port: Int
        var tls: Bool
        /// Connections dialled offering only HTTP/1.1 (for WebSocket upgrades).
        var http1Only = false
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
    }

    private struct State {
        var machine = Machine()
        var waiting: [Int: Waiting] = [:]
    }

    private let state = NIOLockedValueBox(State())
    let maxIdleTime: TimeAmount

    init(maxIdleTime: TimeAmount = .seconds(60)) {
        self.maxIdleTime = maxIdleTime
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
        let (acquisition, stale, waiter) = state.withLockedValue { state -> (Machine.Acquisition, [UpstreamConnection], EventLoopPromise<Lease>?) in
            let (acquisition, stale) = state.machine.acquire(
                key, limit: limit, loop: ObjectIdentifier(loop), now: now, maxIdle: maxIdleTime,
                mayMultiplex: mayMultiplex, isAlive: { $0.isActive })
            guard case .wait(let id) = acquisition else { return (acquisition, stale, nil) }
            let promise = loop.makePromise(of: Lease.self)
            state.waiting[id] = Waiting(promise: promise, timeout: nil)
            return (acquisition, stale, promise)
        }
        stale.forEach { $0.close() }
        switch acquisition {
        case .lease(let connection):
            return .ready(.connection(connection))
        case .stream(let connection):
            return .ready(.stream(connection))
        case .dial:
            return .ready(.permit)
        case .wait(let id):
            guard let promise = waiter else { preconditionFailure("a place in line without its promise (waiter \(id))") }
            // The timer holds the pool strongly (it lives as long as the server,
            // and the timer is cancelled when the waiter is served): a weak
            // capture's side table is reported by LeakSanitizer at exit.
            let timeout = loop.scheduleTask(in: queueTimeout) {
                let expired = self.state.withLockedValue { state -> Bool in
                    guard state.machine.waiterExpired(key, id: id) else { return false }
                    state.waiting[id] = nil
                    return true
                }
                if expired {
                    promise.fail(ProxyError(.queueTimeout, host: key.host,
                                            detail: "all upstream connections to \(key.host):\(key.port) stayed busy for \(queueTimeout.seconds) s (max_upstream_connections reached)"))
                }
            }
            let stillWaiting = state.withLockedValue { state -> Bool in
                guard state.waiting[id] != nil else { return false }
                state.waiting[id]!.timeout = timeout
                return true
            }
            if !stillWaiting { timeout.cancel() }  // served meanwhile
            return .queued(promise.futureResult)
        }
    }

    // MARK: Lifecycle of a connection

    /// A permit's dial succeeded: the connection now holds that slot.
    /// An HTTP/2 connection carries the dialler's stream and takes waiters on its loop.
    func opened(_ connection: UpstreamConnection) {
        let handOvers = state.withLockedValue { state in
            state.machine.dialled(connection.key, connection: connection, loop: ObjectIdentifier(connection.channel.eventLoop),
                                  streams: connection.multiplexer?.maxStreams).map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }
        }
        handOvers.forEach { Self.grant($0) }
    }

    /// An HTTP/2 connection's stream limit changed (SETTINGS), or it said GOAWAY (0).
    func streamCapacityChanged(_ connection: UpstreamConnection, to capacity: Int) {
        let (handOvers, close) = state.withLockedValue { state in
            let (handOvers, close) = state.machine.streamCapacityChanged(connection.key, connection: connection, to: capacity)
            return (handOvers.map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }, close)
        }
        close?.close()
        handOvers.forEach { Self.grant($0) }
    }

    /// A permit's dial failed: its slot goes to the next waiter (and waiters
    /// held back for its streams get slots to dial), or back.
    func permitReturned(_ key: Key) {
        let handOvers = state.withLockedValue { state in
            state.machine.dialFailed(key).map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }
        }
        handOvers.forEach { Self.grant($0) }
    }

    /// A request is done with `connection`; kept if it can serve another.
    func release(_ connection: UpstreamConnection) {
        let now = NIODeadline.now()
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
        let (handOver, close) = state.withLockedValue { state in
            let (handOver, close) = state.machine.release(connection.key, connection: connection,
                                                          reusable: connection.reusable && connection.isActive, now: now)
            return (handOver.map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }, close)
        }
        connection.receiver = nil
        close?.close()
        Self.grant(handOver)
    }

    /// A stream of this HTTP/2 connection is over (or could not be opened): its room returns.
    func streamEnded(on connection: UpstreamConnection, now: NIODeadline = .now()) {
        let (handOvers, close) = state.withLockedValue { state in
            let (handOvers, close) = state.machine.streamEnded(connection.key, connection: connection, now: now)
            return (handOvers.map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }, close)
        }
        close?.close()
        handOvers.forEach { Self.grant($0) }
    }

    /// The connection's channel closed (the server hung up, or it failed).
    func closed(_ connection: UpstreamConnection) {
        let handOver = state.withLockedValue { state in
            state.machine.closed(connection.key, connection: connection).map { (state.waiting.removeValue(forKey: $0.waiter.id), $0.grant) }
        }
        Self.grant(handOver)
    }

    private static func grant(_ handOver: (Waiting?, UpstreamPoolStateMachine<UpstreamConnection>.Grant)?) {
        guard let (waiting, grant) = handOver else { return }
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

    // MARK: Reload

    /// After a policy reload: connections opened under a policy that changed are
    /// retired (idle ones now, busy ones when their request ends).
    func retire(keeping digests: Set<String>) {
        state.withLockedValue { $0.machine.retire(keeping: digests) }.forEach { $0.close() }
    }

    /// Closes every idle connection (shutdown).
    func closeIdle() {
        state.withLockedValue { $0.machine.closeIdle() }.forEach { $0.close() }
    }
}
