import Foundation
import PinproxyPolicy
import Testing

/// The token buckets behind `rate_limit:` and the swap listener's limit, on an injected clock.
struct TokenBucketsTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aBurstPassesThenTheRateRefills() {
        var buckets = TokenBuckets<String>()
        let limit = RateLimitPolicy(requestsPerSecond: 2, burst: 3, per: .client)
        let key = "billing"
        #expect((0..<3).map { _ in buckets.admit(key, limit: limit, now: Self.now) } == [nil, nil, nil])
        #expect(buckets.admit(key, limit: limit, now: Self.now) == 1)
        #expect(buckets.admit("reports", limit: limit, now: Self.now) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(0.5)) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(0.5)) == 1)
    }

    /// Past its bound it forgets the buckets that refilled (each client
    /// seen once, long ago), keeps those still spending, and answers as if
    /// it had forgotten none.
    @Test func bucketsRefilledToTheirBurstAreForgottenPastTheBound() {
        var buckets = TokenBuckets<String>(pruneAbove: 100)
        let limit = RateLimitPolicy(requestsPerSecond: 1, burst: 2, per: .client)
        let early = (0..<101).map { "early-\($0)" }
        for key in early { #expect(buckets.admit(key, limit: limit, now: Self.now) == nil) }
        #expect(buckets.count == 101, "none had refilled at the first sweep: all kept")

        let later = Self.now.addingTimeInterval(10)
        let busy = "busy"
        #expect(buckets.admit(busy, limit: limit, now: later) == nil)
        #expect(buckets.admit(busy, limit: limit, now: later) == nil)
        for n in 0..<101 { _ = buckets.admit("later-\(n)", limit: limit, now: later) }
        #expect(buckets.count == 102, "at the second sweep (past 202) the early ones, refilled by now, went")

        #expect(buckets.admit(busy, limit: limit, now: later) == 1, "a bucket still spent is kept")
        #expect(buckets.admit(early[0], limit: limit, now: later) == nil)
        #expect(buckets.admit(early[0], limit: limit, now: later) == nil, "a forgotten client gets the full burst it had")
        #expect(buckets.admit(early[0], limit: limit, now: later) == 1)
    }

    @Test func aSlowRateSaysHowLongToWait() {
        var buckets = TokenBuckets<String>()
        let limit = RateLimitPolicy(requestsPerSecond: 0.1, burst: 1, per: .policy)
        let key = "p"
        #expect(buckets.admit(key, limit: limit, now: Self.now) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now) == 10)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(4)) == 6)
    }
}
