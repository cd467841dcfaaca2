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

}
