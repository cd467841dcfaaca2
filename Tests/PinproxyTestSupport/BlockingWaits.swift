import Foundation
import Testing

/// The trait for suites whose tests wait synchronously: they spawn external
/// processes (the pinproxy binary, curl, openssl, nginx) and wait for them with
/// waitpid polls, read their files, block on sockets.
///
/// Why: Swift Testing runs every test, sync or async, on Swift concurrency's
/// cooperative pool, which has one thread per core (two on the machines this
/// suite runs on). A test that blocks a pool thread for seconds starves the
/// async tests beside it, and their timeouts fire: the suite then only
/// passed with `--no-parallel`. Under this trait a test runs on threads of
/// its own (`BlockingTestExecutor`, a task-executor preference, which child
/// tasks inherit), so blocking there costs the pool nothing; and at most
/// `BlockingTestAdmission.width` such tests run at once, so two cores are
/// not buried under processes whose start-up the tests wait for.
///
///     @Suite("Routing", .serialized, .blockingWaits)
public struct BlockingWaits: SuiteTrait, TestTrait, TestScoping {
    // Said, not inferred: the library's defaults would otherwise make it Never.
    public typealias TestScopeProvider = Self

    public var isRecursive: Bool { true }

    /// Per test function and per test case (the inner one passes through),
    /// never per suite: a suite's scope would hold an admission for the whole
    /// suite while its tests wait for theirs.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        test.isSuite ? nil : self
    }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        // The trait on a suite and again on a test in it: one admission, or
        // the inner one could wait for itself.
        guard !Self.inside else { return try await function() }
        await BlockingTestAdmission.shared.acquire()
        defer { BlockingTestAdmission.shared.release() }
        try await Self.$inside.withValue(true) {
            try await withTaskExecutorPreference(BlockingTestExecutor.shared) {
                try await function()
            }
        }
    }

    @TaskLocal private static var inside = false
}

extension Trait where Self == BlockingWaits {
    /// Runs the tests off the cooperative pool, a bounded number at once (see `BlockingWaits`).
    public static var blockingWaits: Self { BlockingWaits() }
}

/// A task executor with a thread per runnable job: threads are started when
/// every existing one is busy (a blocked test holds its thread) and kept for
/// the next job. The admission bound keeps their number small.
public final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    public static let shared = BlockingTestExecutor()
    /// The threads' name (Linux allows 15 bytes), for stack dumps.
    public static let threadName = "pp-blocking"

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var idle = 0

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        // Waiters still count as idle until they wake: more queued jobs than
        // waiters means one would wait for a thread that may block for long.
        let start = jobs.count > idle
        condition.signal()
        condition.unlock()
        if start { startThread() }
    }

    private func startThread() {
        let thread = Thread { [self] in
            SuiteThreads.enter(named: Self.threadName)
            while true {
                condition.lock()
                while jobs.isEmpty {
                    idle += 1
                    condition.wait()
                    idle -= 1
                }
                let job = jobs.removeFirst()
                condition.unlock()
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// How many `.blockingWaits` tests run at once: twice the cores (they mostly
/// wait for processes), or `PINPROXY_TEST_BLOCKING_WIDTH`.
public final class BlockingTestAdmission: @unchecked Sendable {
    public static let shared = BlockingTestAdmission(width: BlockingTestAdmission.configuredWidth)

    public static var configuredWidth: Int {
        if let text = ProcessInfo.processInfo.environment["PINPROXY_TEST_BLOCKING_WIDTH"], let width = Int(text), width > 0 {
            return width
        }
        return max(2, 2 * ProcessInfo.processInfo.activeProcessorCount)
    }

    private let lock = NSLock()
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    public init(width: Int) {
        free = width
    }

    public func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiters.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    public func release() {
        let next = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiters.isEmpty {
                free += 1
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()
    }
}

/// Runs blocking `work` (a child process to its end, a blocking read) on a
/// thread of its own and awaits its result: for async code outside
/// `.blockingWaits` suites, which must not block the cooperative pool (nor
/// NIO's thread pool, which the code under test may need meanwhile).
public func onOwnThread<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        Thread {
            SuiteThreads.enter(named: "pp-own-thread")
            let result = Result(catching: work)
            SuiteThreads.leave()
            continuation.resume(returning: result)
        }.start()
    }
    return try result.get()
}

extension Task where Failure == any Error {
    /// A suite's shared set-up (`static let setup = Task.blockingSetup { … }`),
    /// started on `BlockingTestExecutor`'s threads: it waits for processes
    /// synchronously, and an unstructured task does not take the preference of
    /// the test that first touches it.
    public static func blockingSetup(_ operation: sending @escaping () async throws -> Success) -> Task {
        Task(executorPreference: BlockingTestExecutor.shared, operation: operation)
    }
}

/// The threads this suite starts for blocking work: `BlockingTestExecutor`'s
/// and `onOwnThread`'s. A thread started from a cooperative pool thread
/// inherits that thread's kernel name, so each renames itself as it starts,
/// through /proc (Foundation's `Thread.name` setter sometimes leaves the
/// kernel's name as it was: about one first start in four here), and the
/// threads a test starts from one of them inherit the new name. They are
/// also registered, which does not depend on names at all.
public enum SuiteThreads {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var running: Set<pthread_t> = []

    /// Whether the calling thread is one of them.
    public static var isCurrent: Bool {
        lock.withLock { running.contains(pthread_self()) }
    }

    /// `name`: at most 15 bytes (Linux keeps no more).
    static func enter(named name: String) {
        try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        _ = lock.withLock { running.insert(pthread_self()) }
    }

    /// When the thread ends (its identifier may be reused by the next).
    static func leave() {
        _ = lock.withLock { running.remove(pthread_self()) }
    }
}

/// Swift concurrency's cooperative pool, seen from a synchronous wait.
///
/// A wait that blocks a pool thread (two on this machine) starves every
/// async test and server task beside it: in parallel runs their timers then
/// fire late, and the failure lands on a test that did nothing wrong. So
/// the suite's blocking primitives (`pollUntilBlocking`, and through it
/// every child-process wait; `RawClient`'s reads) refuse to run there: the
/// test that called one is failed, in every run, serial or parallel.
/// Run them under `.blockingWaits`, or in `onOwnThread`.
public enum CooperativePool {
    /// Whether this thread is one of the pool's. libdispatch names them
    /// after their root queue ("com.apple.root.default-qos", which Linux's
    /// 15-byte thread names keep as "oot.default-qos"); the suite's own
    /// threads may carry that name too (see `SuiteThreads`). The kernel's
    /// name, read from /proc: Foundation's `Thread.name` is a copy taken
    /// when it first wrapped the thread, and does not always follow.
    public static var isCurrentThread: Bool {
        guard !SuiteThreads.isCurrent,
              let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) else { return false }
        return name.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix("-qos")
    }

    /// Records an issue against the running test when `wait` is about to
    /// block a pool thread.
    public static func refuseBlocking(_ wait: String) {
        guard isCurrentThread else { return }
        // Outside a test's task (a detached task, a deinit on another
        // thread) the issue names no test, so the stack says where.
        let stack = Test.current == nil ? "\n" + Thread.callStackSymbols.prefix(16).joined(separator: "\n") : ""
        Issue.record("\(wait) blocks a thread of Swift concurrency's cooperative pool: run it under .blockingWaits or in onOwnThread\(stack)")
    }
}
