import Foundation

/// One thread that lives as long as the test process, on which every child
/// process is spawned. A child started with a parent-death signal
/// (`ChildProcess`) gets it when the thread that spawned it ends, not only
/// when the process does; the threads tests run on (Swift concurrency's
/// pool, Dispatch's workers) may end while their children are still wanted.
final class ParentThread: @unchecked Sendable {
    static let shared = ParentThread()

    private let condition = NSCondition()
    private var jobs: [() -> Void] = []

    private init() {
        Thread { [unowned self] in self.serve() }.start()
    }

    /// Runs `body` on the thread and waits for its result.
    func run<T>(_ body: @escaping () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        var result: T?
        condition.withLock {
            jobs.append {
                result = body()
                done.signal()
            }
            condition.signal()
        }
        done.wait()
        return result!
    }

    private func serve() {
        // Named as the suite's own threads are: a thread inherits its
        // creator's kernel name, which may be a concurrency pool thread's.
        SuiteThreads.enter(named: "pp-spawner")
        while true {
            let job = condition.withLock {
                while jobs.isEmpty { condition.wait() }
                return jobs.removeFirst()
            }
            job()
        }
    }
}
