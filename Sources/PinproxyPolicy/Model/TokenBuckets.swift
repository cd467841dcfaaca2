import Foundation

/// Token buckets, one for each key: a key may make `limit.burst` requests at
/// once and `limit.requestsPerSecond` after that. Pure: the clock is the
/// caller's. One type for every limit pinproxy applies itself: `rate_limit:`
/// (docs/contract.md §4 `rate_limited`, keyed by policy and client) and the
/// swap listener's (§7, keyed by client address).
///
/// A bucket is kept for every key seen, so past `pruneAbove` buckets the
/// ones refilled to their burst are forgotten: a full bucket is what a key
/// not seen before gets, so forgetting it changes no answer. The next sweep
/// waits until the count has doubled from what was kept, so a sweep costs
/// O(1) a request, amortized, however many keys are still spending.
public struct TokenBuckets<Key: Hashable & Sendable>: Sendable {
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
    public let pruneAbove: Int
    private var nextPrune: Int

    public init(pruneAbove: Int = 10_000) {
        self.pruneAbove = pruneAbove
        nextPrune = pruneAbove
    }

    /// How many buckets are kept.
    public var count: Int { buckets.count }

    /// nil: admitted (one token taken). Else the whole seconds until one is
    /// there (at least 1), for `Retry-After`. `limit.per` is the caller's
    /// business: it chose the key.
    public mutating func admit(_ key: Key, limit: RateLimitPolicy, now: Date) -> Int? {
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
