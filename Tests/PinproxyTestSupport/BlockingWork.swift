import Foundation
import Testing

/// Runs a suite's tests on dedicated threads instead of Swift's cooperative
/// pool. End-to-end tests wait synchronously (curl, child processes, sockets)
/// for seconds at a time; on a 2-core machine the cooperative pool has two
/// threads, and blocking them starves every other test's tasks. With this
/// trait the blocking happens on threads of its own.
public struct BlockingWork: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(DedicatedThreadsExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == BlockingWork {
    /// The suite blocks threads: give it its own.
    public static var blockingWork: Self { BlockingWork() }
}

/// A task executor on a fixed set of plain threads (enough for every suite
/// that may block at once).
final class DedicatedThreadsExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = DedicatedThreadsExecutor(threads: 48)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    init(threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "pinproxy-tests-blocking-\(index)"
            thread.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
