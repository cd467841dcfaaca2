import Foundation
import PinproxyTestSupport
import Testing

/// The trait that lets the suite run in parallel: tests that wait
/// synchronously run on threads of their own, not on the cooperative pool
/// (one thread per core) that the async tests beside them need.
@Suite("Blocking waits run off the cooperative pool", .blockingWaits)
struct BlockingWaitsTests {
    @Test("a synchronous test runs on the blocking threads")
    func aSynchronousTestRunsOnTheBlockingThreads() {
        #expect(SuiteThreads.isCurrent, "on \(Self.threadName() ?? "an unnamed thread")")
        #expect(!CooperativePool.isCurrentThread)
    }

    /// More tasks block than the pool has threads; what releases them runs on
    /// the pool (a detached task has no executor preference). On the pool the
    /// blocked tasks would hold every thread and the release would never run:
    /// the waits would end at their 30 s bound, unreleased.
    @Test("blocked tasks beyond the pool's width leave the pool free")
    func blockedTasksLeaveThePoolFree() async {
        let blocked = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let semaphore = DispatchSemaphore(value: 0)
        let released = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<blocked {
                group.addTask { Self.wait(semaphore, seconds: 30) }
            }
            Task.detached {
                for _ in 0..<blocked { semaphore.signal() }
            }
            var released = 0
            for await wasReleased in group where wasReleased { released += 1 }
            return released
        }
        #expect(released == blocked, "only \(released) of \(blocked) blocked tasks were released")
    }

    /// A thread such a test starts itself (three concurrent apps, say) is not
    /// taken for one of the pool's, whatever name its creator started with.
    @Test("a thread a blocking test starts is not taken for the pool's")
    func aThreadABlockingTestStartsIsNotThePools() {
        final class Seen: @unchecked Sendable { var onPool: Bool? }
        let seen = Seen()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            seen.onPool = CooperativePool.isCurrentThread
            done.signal()
        }
        done.wait()
        #expect(seen.onPool == false)
    }

    /// A synchronous wait (kept out of the async function, where it belongs to no one).
    private static func wait(_ semaphore: DispatchSemaphore, seconds: Int) -> Bool {
        semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
    }

    private static func threadName() -> String? {
        Thread.current.name
    }
}

/// The async `pollUntil` suspends between looks; it never sleeps a thread of
/// the cooperative pool. Written as the token-session tests write it, inside
/// `#expect(await …)` with a synchronous condition: there a blocking overload
/// of the same name was once chosen, and the suite stalled in parallel runs.
@Suite("pollUntil leaves the cooperative pool free")
struct PollUntilTests {
    /// More polls than the pool has threads, and what makes their condition
    /// true runs on the pool only once every poll has looked at least once.
    /// Polls that held their threads would leave it no thread: every poll
    /// would end at its bound, false.
    @Test("polls beyond the pool's width all see the condition come true")
    func pollsBeyondThePoolsWidthLeaveThePoolFree() async {
        let pollers = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let looked = LockedCounter()
        let done = LockedCounter()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<pollers {
                group.addTask {
                    var seen = false
                    #expect(await pollUntil(timeout: 30) {
                        if !seen { seen = true; looked.add() }
                        return done.value > 0
                    }, "poll \(index) of \(pollers)")
                }
            }
            group.addTask {
                // On the pool too: it can only run if the polls left a thread free.
                #expect(await pollUntil(timeout: 30) { looked.value == pollers }, "only \(looked.value) of \(pollers) polls started")
                done.add()
            }
        }
    }
}

private final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// The suite's synchronous waits refuse to block the cooperative pool, so a
/// test that does is failed itself, in every run, instead of starving the
/// tests beside it now and then.
@Suite("Blocking waits on the cooperative pool are refused")
struct CooperativePoolGuardTests {
    @Test("a blocking poll on the pool records an issue")
    func aBlockingPollOnThePoolRecordsAnIssue() async {
        // Async and without `.blockingWaits`: this runs on the pool.
        #expect(CooperativePool.isCurrentThread, "\(Thread.current.name ?? "an unnamed thread") is not the pool's")
        withKnownIssue("pollUntilBlocking on a pool thread") {
            Self.pollOnce()
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("pollUntilBlocking blocks a thread of Swift concurrency's cooperative pool") }
        }
    }

    @Test("the same poll on a thread of its own records none")
    func theSamePollOnAThreadOfItsOwnRecordsNone() async {
        let onPool = await onOwnThread { CooperativePool.isCurrentThread }
        #expect(!onPool)
    }

    /// Synchronous, as the suite's blocking callers are (the poll is `noasync`).
    private static func pollOnce() {
        _ = pollUntilBlocking(timeout: 0) { true }
    }
}
