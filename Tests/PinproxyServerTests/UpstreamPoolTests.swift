import Dispatch
import NIOCore
import NIOEmbedded
import Testing

@testable import PinproxyServer

/// The pool around its state machine: a waiter's promise and queue timer.
@Suite("Upstream pool")
struct UpstreamPoolTests {
    let key = UpstreamPool.Key(digest: "d1", host: "a.test", port: 443, tls: true)

    /// A key's hash takes its digest's once, at construction: keys equal in
    /// every field are one key, and a key differing in any field is another.
    @Test func keysAreEqualExactlyWhenEveryFieldIs() {
        let same = UpstreamPool.Key(digest: "d" + "1", host: "a.test", port: 443, tls: true)
        #expect(same == key && same.hashValue == key.hashValue)
        let others = [
            UpstreamPool.Key(digest: "d2", host: "a.test", port: 443, tls: true),
            UpstreamPool.Key(digest: "d1", host: "b.test", port: 443, tls: true),
            UpstreamPool.Key(digest: "d1", host: "a.test", port: 8443, tls: true),
            UpstreamPool.Key(digest: "d1", host: "a.test", port: 443, tls: false),
            UpstreamPool.Key(digest: "d1", host: "a.test", port: 443, tls: true, http1Only: true),
        ]
        for other in others { #expect(other != key, "\(other)") }
        #expect(Set(others + [key, same]).count == others.count + 1)
    }

    /// A slot freed on another event loop's thread just as a request joins the
    /// line must reach that request: handed to a waiter whose promise was not
    /// filed yet, it was lost, and the request waited past its queue timeout
    /// for ever (a stuck client in the 500-client end-to-end run).
    @Test func aSlotFreedWhileAWaiterJoinsTheLineReachesIt() {
        let pool = UpstreamPool()
        let loop = InterleavingLoop()
        let key = self.key
        var first: UpstreamPool.Lease?
        pool.acquire(key, limit: 1, queueTimeout: .seconds(60), mayMultiplex: true, on: loop)
            .assumeIsolated().whenSuccess { first = $0 }
        guard case .permit? = first else {
            Issue.record("the first request dials")
            return
        }
        // The second request waits for that dial. The pool schedules its queue
        // timer right after putting it in line: then, as if on another thread,
        // the dial is refused by the guard and its slot passes to the next waiter.
        loop.beforeSchedule = {
            pool.dialFailed(key, failure: UpstreamPoolStateMachineTests.guardRefusal, on: loop)
        }
        var second: Result<UpstreamPool.Lease, any Error>?
        pool.acquire(key, limit: 1, queueTimeout: .seconds(60), mayMultiplex: true, on: loop)
            .assumeIsolated().whenComplete { second = $0 }
        // Past queue_timeout: not even the timer answered a waiter the machine had let go.
        loop.base.advanceTime(by: .seconds(61))
        guard case .success(.permit)? = second else {
            Issue.record("the waiter was never answered (\(String(describing: second)))")
            return
        }
    }
}

/// An `EmbeddedEventLoop` that runs `beforeSchedule` once, the next time a
/// task is scheduled on it: a seam to act on shared state at that moment.
final class InterleavingLoop: EventLoop, @unchecked Sendable {
    let base = EmbeddedEventLoop()
    var beforeSchedule: (() -> Void)?

    var inEventLoop: Bool { base.inEventLoop }
    var now: NIODeadline { base.now }

    func execute(_ task: @escaping @Sendable () -> Void) {
        base.execute(task)
    }

    func scheduleTask<T>(deadline: NIODeadline, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        runHook()
        return base.scheduleTask(deadline: deadline, task)
    }

    func scheduleTask<T>(in delay: TimeAmount, _ task: @escaping @Sendable () throws -> T) -> Scheduled<T> {
        runHook()
        return base.scheduleTask(in: delay, task)
    }

    func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
        base.shutdownGracefully(queue: queue, callback)
    }

    private func runHook() {
        let hook = beforeSchedule
        beforeSchedule = nil
        hook?()
    }
}

extension UpstreamPool {
    /// Every answer as a future, as the tests observe them.
    func acquire(_ key: Key, limit: Int, queueTimeout: TimeAmount, mayMultiplex: Bool = false, on loop: any EventLoop) -> EventLoopFuture<Lease> {
        switch acquireNow(key, limit: limit, queueTimeout: queueTimeout, mayMultiplex: mayMultiplex, on: loop) {
        case .ready(let lease): return loop.makeSucceededFuture(lease)
        case .queued(let future): return future
        }
    }
}
