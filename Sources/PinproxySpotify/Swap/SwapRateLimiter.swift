import Foundation
import NIOConcurrencyHelpers

/// Per-client token buckets for the swap listener: each client (by IP) may
/// make `burst` requests at once and `perSecond` a second after that; the
/// rest get 429 with `Retry-After`. Clock injected, so it is tested with tables.
public final class SwapRateLimiter: Sendable {
    public let burst: Double
    public let perSecond: Double
    /// Above this many tracked clients, full (idle) buckets are forgotten.
    let maxClients: Int
    private let clock: @Sendable () -> Date
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    struct Bucket {
        var tokens: Double
        var updated: Date
    }

    public enum Decision: Equatable, Sendable {
        case allowed
        /// Whole seconds until a token is back (at least 1).
        case limited(retryAfter: Int)
    }

    public init(burst: Int = 10, perSecond: Double = 1, maxClients: Int = 10_000, clock: @escaping @Sendable () -> Date = Date.init) {
        self.burst = Double(burst)
        self.perSecond = perSecond
        self.maxClients = maxClients
        self.clock = clock
    }

    public func take(client: String) -> Decision {
        let now = clock()
        return buckets.withLockedValue { buckets in
            var bucket = buckets[client] ?? Bucket(tokens: burst, updated: now)
            bucket.tokens = min(burst, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * perSecond)
            bucket.updated = now
            let decision: Decision
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                decision = .allowed
            } else {
                decision = .limited(retryAfter: max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up))))
            }
            buckets[client] = bucket
            if buckets.count > maxClients {
                let burst = self.burst, perSecond = self.perSecond
                buckets = buckets.filter { $0.value.tokens + now.timeIntervalSince($0.value.updated) * perSecond < burst }
            }
            return decision
        }
    }
}
