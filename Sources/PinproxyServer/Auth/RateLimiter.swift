import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// Token buckets for `rate_limit:` (docs/contract.md §4 `rate_limited`), one
/// per (policy, client) or per policy. Pure: the clock is the caller's.
struct TokenBuckets: Sendable {
    struct Key: Hashable, Sendable {
        var policy: String
        /// The client's identity or address under `per: client`; "" under `per: policy`.
        var client: String
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var at: Date
    }

    private var buckets: [Key: Bucket] = [:]

    /// nil: admitted (one token taken). Else the whole seconds until one is there (at least 1).
    mutating func admit(_ key: Key, limit: RateLimitPolicy, now: Date) -> Int? {
        var bucket = buckets[key] ?? Bucket(tokens: Double(limit.burst), at: now)
        let elapsed = max(0, now.timeIntervalSince(bucket.at))
        bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * limit.requestsPerSecond)
        bucket.at = now
        defer { buckets[key] = bucket }
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return nil
        }
        return max(1, Int(((1 - bucket.tokens) / limit.requestsPerSecond).rounded(.up)))
    }
}

/// The proxy's buckets, shared by every connection.
final class RateLimiter: Sendable {
    private let buckets = NIOLockedValueBox(TokenBuckets())
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    func admit(policy: HostPolicy, client: String) -> Int? {
        guard let limit = policy.rateLimit else { return nil }
        let key = TokenBuckets.Key(policy: policy.file + "|" + policy.metricLabel, client: limit.per == .client ? client : "")
        let now = clock()
        return buckets.withLockedValue { $0.admit(key, limit: limit, now: now) }
    }
}
