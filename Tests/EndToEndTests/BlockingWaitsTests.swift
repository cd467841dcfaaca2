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
        #expect(Self.threadName() == BlockingTestExecutor.threadName)
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

    /// A synchronous wait (kept out of the async function, where it belongs to no one).
    private static func wait(_ semaphore: DispatchSemaphore, seconds: Int) -> Bool {
        semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
    }

    private static func threadName() -> String? {
        Thread.current.name
    }
}
