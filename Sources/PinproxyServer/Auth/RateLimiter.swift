import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// Token buckets for `rate_limit:` (docs/contract.md §4 `rate_limited`), one
/// per (policy, client) or per policy. Pure: the clock is the caller's.
///
/// Under `per: client` a bucket is kept for each client seen, so past
/// `pruneAbove` buckets the ones refilled to their burst are forgotten: a
/// full bucket is what a client not seen before gets, so forgetting it
/// changes no answer. The next sweep waits until the count has doubled
/// from what was kept, so a sweep costs O(1) a request, amortized, however
/// many clients are still spending.
struct TokenBuckets: Sendable {
    struct Key: Hashable, Sendable {
        var policy: String
        /// The client's identity or address under `per: client`; "" under `per: policy`.
        var client: String
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var at: Date
        /// The limit it was last spent under (a reload may change it).
        var limit: RateLimitPolicy

        /// Its tokens at `now`, refilled at its limit's rate up to its burst.
        func tokens(at now: Date) -> Double {
            min(Double(limit.burst), tokens + max(0, now.timeIntervalSince(at)) * limit.requestsPerSecond)
        }

        func isFull(at now: Date) -> Bool { tokens(at: now) >= Double(limit.burst) }
    }

    private var buckets: [Key: Bucket] = [:]
    let pruneAbove: Int
    private var nextPrune: Int

    init(pruneAbove: Int = 10_000) {
        self.pruneAbove = pruneAbove
        nextPrune = pruneAbove
    }

    /// How many buckets are kept.
    var count: Int { buckets.count }

    /// nil: admitted (one token taken). Else the whole seconds until one is there (at least 1).
    mutating func admit(_ key: Key, limit: RateLimitPolicy, now: Date) -> Int? {
        var bucket = buckets[key] ?? Bucket(tokens: Double(limit.burst), at: now, limit: limit)
        bucket.limit = limit
        bucket.tokens = bucket.tokens(at: now)
        bucket.at = now
        defer {
            buckets[key] = bucket
            if buckets.count > nextPrune { prune(now: now) }
        }
        if bucket.tokens >= 1 {
            bucket.tokens -= 1
            return nil
        }
        return max(1, Int(((1 - bucket.tokens) / limit.requestsPerSecond).rounded(.up)))
    }

    private mutating func prune(now: Date) {
        buckets = buckets.filter { !$0.value.isFull(at: now) }
        nextPrune = max(pruneAbove, 2 * buckets.count)
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
