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
    mutating func record(credential: String, host: String, retryAfter: String?, now: Date) {
        guard let retryAfter, let date = RetryAfter.parse(retryAfter, now: now) else { return }
        let end = min(date, now.addingTimeInterval(Self.longest))
        guard end > now else { return }
        let key = Key(credential: credential, host: host.lowercased())
        until[key] = max(until[key] ?? end, end)
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

/// The proxy's windows, shared by every connection.
final class UpstreamThrottle: Sendable {
    private let windows = NIOLockedValueBox(ThrottleWindows())
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    func record(credential: String, host: String, retryAfter: String?) {
        let now = clock()
        windows.withLockedValue { $0.record(credential: credential, host: host, retryAfter: retryAfter, now: now) }
    }

    func remaining(credential: String, host: String) -> Int? {
        let now = clock()
        return windows.withLockedValue { $0.remaining(credential: credential, host: host, now: now) }
    }
}
