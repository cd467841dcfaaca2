import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// `rate_limit:`'s buckets (docs/contract.md §4 `rate_limited`), shared by
/// every connection: one per (policy, client) under `per: client`, one per
/// policy under `per: policy`.
final class RateLimiter: Sendable {
    struct Key: Hashable, Sendable {
        var policy: String
        /// The client's identity or address under `per: client`; "" under `per: policy`.
        var client: String
    }

    private let buckets = NIOLockedValueBox(TokenBuckets<Key>())
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    /// nil: admitted. Else the whole seconds until the client may try again.
    func admit(policy: HostPolicy, client: String) -> Int? {
        guard let limit = policy.rateLimit else { return nil }
        let key = Key(policy: policy.file + "|" + policy.metricLabel, client: limit.per == .client ? client : "")
        let now = clock()
        return buckets.withLockedValue { $0.admit(key, limit: limit, now: now) }
    }
}
