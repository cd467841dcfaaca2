import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// Per-client token buckets for the swap listener: each client (by IP) may
/// make `burst` requests at once and `perSecond` a second after that; the
/// rest get 429 with `Retry-After`. The buckets are `TokenBuckets`, as for
/// `rate_limit:`; the clock is injected, so it is tested with tables.
public final class SwapRateLimiter: Sendable {
    let limit: RateLimitPolicy
    private let clock: @Sendable () -> Date
    private let buckets: NIOLockedValueBox<TokenBuckets<String>>

    public enum Decision: Equatable, Sendable {
        case allowed
        /// Whole seconds until a token is back (at least 1).
        case limited(retryAfter: Int)
    }

    /// `maxClients`: above this many tracked clients, the full (idle)
    /// buckets are forgotten.
    public init(burst: Int = 10, perSecond: Double = 1, maxClients: Int = 10_000, clock: @escaping @Sendable () -> Date = Date.init) {
        limit = RateLimitPolicy(requestsPerSecond: perSecond, burst: burst, per: .client)
        buckets = NIOLockedValueBox(TokenBuckets(pruneAbove: maxClients))
        self.clock = clock
    }

    public func take(client: String) -> Decision {
        let now = clock()
        let wait = buckets.withLockedValue { $0.admit(client, limit: limit, now: now) }
        return wait.map { .limited(retryAfter: $0) } ?? .allowed
    }
}
