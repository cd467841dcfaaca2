import Foundation

/// When a cached token should be refreshed, and how long to wait after a
/// failed refresh. Pure: the session passes in the clock's time and a random
/// source, and the tests drive these with tables.
enum RefreshTiming {
    /// docs/contract.md §10: refresh at `min(refresh_before, lifetime / 2)` before expiry.
    static func softDeadline(issuedAt: Date, lifetime: TimeInterval, refreshBefore: Duration) -> Date {
        let lead = min(refreshBefore.timeInterval, lifetime / 2)
        return issuedAt.addingTimeInterval(lifetime - lead)
    }
}

/// Full-jitter exponential backoff (AWS architecture blog): attempt n waits a
/// uniform random time in [0, min(cap, base · 2^(n-1))], floored so a run of
/// zero draws cannot make a hot loop, and never ends before a `Retry-After`.
struct Backoff: Sendable, Equatable {
    static let base: TimeInterval = 1
    static let cap: TimeInterval = 60
    static let floor: TimeInterval = 0.1

    /// Consecutive failures so far.
    var attempt: Int
    /// No token request before this.
    var notBefore: Date
    /// The wait comes from a 429's `Retry-After` (callers whose timeout ends
    /// before it fail at once with `rateLimited`).
    var rateLimitedUntil: Date?

    /// The backoff after one more failure at `now`.
    /// `cap`: a lower ceiling for failures that cost nobody anything to retry
    /// (an unreachable session store fails fast; docs/contract.md §12).
    static func after(_ previous: Backoff?, now: Date, retryAfter: Date?, cap: TimeInterval = Backoff.cap,
                      random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) -> Backoff {
        let attempt = (previous?.attempt ?? 0) + 1
        let ceiling = min(cap, base * pow(2, Double(min(attempt - 1, 30))))
        var notBefore = now.addingTimeInterval(max(floor, random(0...ceiling)))
        if let retryAfter, retryAfter > notBefore { notBefore = retryAfter }
        return Backoff(attempt: attempt, notBefore: notBefore, rateLimitedUntil: retryAfter.map { max($0, now) })
    }
}
