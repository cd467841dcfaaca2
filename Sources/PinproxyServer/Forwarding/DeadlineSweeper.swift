import NIOCore
import NIOPosix

/// A connection handler with deadlines (header, idle, response timeouts).
protocol DeadlineWatcher: AnyObject {
    /// Called on the watcher's event loop at every sweep.
    func checkDeadlines(now: NIODeadline)
}

/// One repeating timer per event loop that checks the deadlines of every
/// watched connection.
///
/// Why not a scheduled task per timeout: a keep-alive request armed and
/// cancelled three of them (header, idle, response), and NIO's scheduled-task
/// heap made that a measurable share of a small request's cost
/// (bench/README.md). With the sweeper, setting or clearing a deadline is a
/// store, and a deadline is acted on within one `tick` of passing; Squid
/// checks its timeouts once a second the same way. The timer runs only while
/// its loop has connections to watch: it stops at the first sweep that finds
/// none, not as the last one leaves, because an HTTP/2 session's streams come
/// and go all the time and each stop and start scheduled and cancelled a
/// task on NIO's heap (bench/README.md, issue 33, twenty-seventh pass).
final class DeadlineSweeper: @unchecked Sendable {  // confined to its event loop's thread
    static let tick = TimeAmount.milliseconds(100)
    private static let perThread = ThreadSpecificVariable<DeadlineSweeper>()

    /// The sweeper of the event loop the caller runs on (one loop a thread;
    /// a test's embedded loops on one thread each get their own).
    static func current(on eventLoop: any EventLoop) -> DeadlineSweeper {
        eventLoop.preconditionInEventLoop()
        if let sweeper = perThread.currentValue, sweeper.eventLoop === eventLoop { return sweeper }
        let sweeper = DeadlineSweeper(eventLoop: eventLoop)
        perThread.currentValue = sweeper
        return sweeper
    }

    private let eventLoop: any EventLoop
    private var watchers: [ObjectIdentifier: any DeadlineWatcher] = [:]
    private var task: RepeatedTask?

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func watch(_ watcher: any DeadlineWatcher) {
        watchers[ObjectIdentifier(watcher)] = watcher
        if task == nil {
            // Weakly: the task may outlive the last watcher by a tick, and a
            // test's loop, holding the task, must not keep its sweeper.
            task = eventLoop.scheduleRepeatedTask(initialDelay: Self.tick, delay: Self.tick) { [weak self] repeated in
                guard let self else { return repeated.cancel() }
                self.sweep()
            }
        }
    }

    func unwatch(_ watcher: any DeadlineWatcher) {
        watchers.removeValue(forKey: ObjectIdentifier(watcher))
    }

    private func sweep() {
        guard !watchers.isEmpty else {
            task?.cancel()
            task = nil
            return
        }
        let now = NIODeadline.now()
        // A watcher may close its connection and unwatch itself meanwhile:
        // iterating a copy keeps that safe.
        for watcher in watchers.values {
            watcher.checkDeadlines(now: now)
        }
    }
}
