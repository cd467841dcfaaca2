import Foundation

/// What tests start must not outlive `swift test`: suites that share one
/// setup keep it in a static, and statics are never deinitialised. Every
/// child process and temp directory is registered here, and an exit hook
/// stops the children (by their own PIDs) and removes the directories.
enum TestCleanup {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var pids: Set<pid_t> = []
    nonisolated(unsafe) private static var directories: Set<String> = []
    nonisolated(unsafe) private static var installed = false

    static func register(pid: pid_t) {
        lock.withLock {
            pids.insert(pid)
            installIfNeeded()
        }
    }

    static func unregister(pid: pid_t) {
        lock.withLock { _ = pids.remove(pid) }
    }

    static func register(directory: String) {
        lock.withLock {
            directories.insert(directory)
            installIfNeeded()
        }
    }

    static func unregister(directory: String) {
        lock.withLock { _ = directories.remove(directory) }
    }

    private static func installIfNeeded() {
        guard !installed else { return }
        installed = true
        atexit {
            TestCleanup.runAtExit()
        }
    }

    private static func runAtExit() {
        let (children, dirs) = lock.withLock { (pids, directories) }
        for pid in children { kill(pid, SIGTERM) }
        for pid in children {
            var status: Int32 = 0
            // A bounded wait (2 s) for an external process to exit after SIGTERM, then SIGKILL.
            for _ in 0..<100 where waitpid(pid, &status, WNOHANG) == 0 { usleep(20_000) }
            if waitpid(pid, &status, WNOHANG) == 0 {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
            }
        }
        for dir in dirs { try? FileManager.default.removeItem(atPath: dir) }
    }
}
