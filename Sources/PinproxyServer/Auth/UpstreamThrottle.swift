import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// Upstream rate limits, per (credential, host) (docs/contract.md §4
/// `upstream_throttled`): once an upstream answers 429 with `Retry-After` to
/// a request carrying a credential, later requests with that credential to
/// that host are answered locally until the window passes, so one noisy app
/// cannot get a shared account banned. Pure: the clock is the caller's.
struct ThrottleWindows: Sendable {
    struct Key: Hashable, Sendable {
        var credential: String
        var host: String
    }

    /// Longest window honoured: a Retry-After of days is an upstream's
    /// mistake or a ban, and holding back for longer would outlive the fix.
    static let longest: TimeInterval = 3600

    private(set) var until: [Key: Date] = [:]
    /// Requests waiting in each window's `throttle_queue`.
    private(set) var waiting: [Key: Int] = [:]

    /// What a request carrying a credential is told while a window may be open.
    enum Admission: Equatable, Sendable {
        case send
        /// Queued: wait until then, `leave`, and ask again (with no queue: a window lengthened meanwhile refuses).
        case wait(until: Date)
        /// 429 `upstream_throttled` with these whole seconds as `Retry-After`.
        case refuse(seconds: Int)
    }

    /// The upstream answered 429 with `retryAfter` (seconds or an HTTP date).
    /// Without a readable `Retry-After` nothing is held back: the window is the upstream's to say.
    /// Returns the window as it now stands when this opened or lengthened it (what other replicas need to hear).
    @discardableResult
    mutating func record(credential: String, host: String, retryAfter: String?, now: Date) -> ThrottleWindow? {
        guard let retryAfter, let date = RetryAfter.parse(retryAfter, now: now) else { return nil }
        return adopt(ThrottleWindow(credential: credential, host: host, until: date), now: now)
    }

    /// A window another replica opened (through the session store, §12), or
    /// one this replica recorded: kept when it ends later than the one held,
    /// capped at `longest` from now. Returns the window held when it changed.
    mutating func adopt(_ window: ThrottleWindow, now: Date) -> ThrottleWindow? {
        let end = min(window.until, now.addingTimeInterval(Self.longest))
        guard end > now else { return nil }
        let key = Key(credential: window.credential, host: window.host.lowercased())
        if let held = until[key], held >= end { return nil }
        until[key] = end
        return ThrottleWindow(credential: key.credential, host: key.host, until: end)
    }

    /// `throttle_queue` (docs/contract.md §4): with a window open, a request
    /// waits when fewer than `queue` already do and the window ends within
    /// `longestWait`; otherwise it is refused. With no window it goes.
    mutating func admit(credential: String, host: String, queue: Int, longestWait: TimeInterval, now: Date) -> Admission {
        guard let seconds = remaining(credential: credential, host: host, now: now) else { return .send }
        let key = Key(credential: credential, host: host.lowercased())
        let end = until[key]!
        let queued = waiting[key] ?? 0
        guard queued < queue, end.timeIntervalSince(now) <= longestWait else { return .refuse(seconds: seconds) }
        waiting[key] = queued + 1
        return .wait(until: end)
    }

    /// A queued request stopped waiting.
    mutating func leave(credential: String, host: String) {
        let key = Key(credential: credential, host: host.lowercased())
        let left = (waiting[key] ?? 1) - 1
        waiting[key] = left > 0 ? left : nil
    }

    /// Whole seconds left in the window (at least 1), or nil when requests may go.
    mutating func remaining(credential: String, host: String, now: Date) -> Int? {
        let key = Key(credential: credential, host: host.lowercased())
        guard let end = until[key] else { return nil }
        guard end > now else {
            until[key] = nil
            return nil
        }
        return max(1, Int(end.timeIntervalSince(now).rounded(.up)))
    }
}

/// The proxy's windows, shared by every connection and, with a session
/// store, by every replica: a window this replica opens is handed to
/// `publish`; one another replica opened arrives through `adopt`.
final class UpstreamThrottle: Sendable {
    private let windows = NIOLockedValueBox(ThrottleWindows())
    private let publisher = NIOLockedValueBox<(@Sendable (ThrottleWindow) -> Void)?>(nil)
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    /// Where windows this replica opens go (the session store); set once at start.
    func share(through publish: @escaping @Sendable (ThrottleWindow) -> Void) {
        publisher.withLockedValue { $0 = publish }
    }

    func record(credential: String, host: String, retryAfter: String?) {
        let now = clock()
        guard let opened = windows.withLockedValue({ $0.record(credential: credential, host: host, retryAfter: retryAfter, now: now) })
        else { return }
        publisher.withLockedValue { $0 }?(opened)
    }

    /// Windows other replicas opened; returns those that opened or lengthened one here.
    func adopt(_ incoming: [ThrottleWindow]) -> [ThrottleWindow] {
        let now = clock()
        return windows.withLockedValue { windows in incoming.compactMap { windows.adopt($0, now: now) } }
    }

    func remaining(credential: String, host: String) -> Int? {
        let now = clock()
        return windows.withLockedValue { $0.remaining(credential: credential, host: host, now: now) }
    }

    /// Whether a request with this credential may go to `host` now: no
    /// window is open. When one is, `admit` decides (queue or refuse).
    func mayGoNow(credential: String, host: String) -> Bool {
        remaining(credential: credential, host: host) == nil
    }

    /// The asynchronous form of `remaining` that honours the policy's
    /// `throttle_queue`: nil when the request may go now or once its window
    /// passed (it waited in the queue), else the `Retry-After` seconds of a
    /// refusal. A request is queued once: if another 429 lengthened the
    /// window while it waited, it is refused then.
    func admit(credential: String, host: String, policy: HostPolicy?) async -> Int? {
        let queue = policy?.spec.auth?.throttleQueue ?? 0
        let longestWait = policy.map { TimeInterval($0.spec.queueTimeout.components.seconds) } ?? 0
        let now = clock()
        let first = windows.withLockedValue {
            $0.admit(credential: credential, host: host, queue: queue, longestWait: longestWait, now: now)
        }
        switch first {
        case .send: return nil
        case .refuse(let seconds): return seconds
        case .wait(let end):
            let wait = max(0, end.timeIntervalSince(now))
            try? await Task.sleep(for: .milliseconds(Int((wait * 1000).rounded(.up))))
            let now = clock()
            return windows.withLockedValue { windows in
                windows.leave(credential: credential, host: host)
                return windows.remaining(credential: credential, host: host, now: now)
            }
        }
    }
}
