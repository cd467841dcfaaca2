import Foundation
import PinproxyPolicy
import Testing
@testable import PinproxyServer

/// The upstream 429 windows, per (credential, host), on an injected clock.
struct UpstreamThrottleTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aRetryAfterInSecondsHoldsThatCredentialAndHostBack() {
        var windows = ThrottleWindows()
        windows.record(credential: "idp", host: "API.example.com", retryAfter: "3", now: Self.now)
        #expect(windows.remaining(credential: "idp", host: "api.example.com", now: Self.now) == 3)
        #expect(windows.remaining(credential: "idp", host: "api.example.com", now: Self.now.addingTimeInterval(2.5)) == 1)
        #expect(windows.remaining(credential: "other", host: "api.example.com", now: Self.now) == nil)
        #expect(windows.remaining(credential: "idp", host: "other.example.com", now: Self.now) == nil)
        #expect(windows.remaining(credential: "idp", host: "api.example.com", now: Self.now.addingTimeInterval(3)) == nil)
    }

    @Test func anHTTPDateIsReadAndAbsurdWindowsAreCapped() {
        var windows = ThrottleWindows()
        windows.record(credential: "a", host: "h", retryAfter: "Fri, 15 Jan 2027 08:00:10 GMT",
                       now: Self.now)  // 2027-01-15T08:00:00Z
        #expect(windows.remaining(credential: "a", host: "h", now: Self.now) == 10)
        windows.record(credential: "b", host: "h", retryAfter: "999999", now: Self.now)
        #expect(windows.remaining(credential: "b", host: "h", now: Self.now) == Int(ThrottleWindows.longest))
    }

    @Test func noReadableRetryAfterHoldsNothingBack() {
        var windows = ThrottleWindows()
        windows.record(credential: "a", host: "h", retryAfter: nil, now: Self.now)
        windows.record(credential: "a", host: "h", retryAfter: "soon", now: Self.now)
        windows.record(credential: "a", host: "h", retryAfter: "0", now: Self.now)
        #expect(windows.remaining(credential: "a", host: "h", now: Self.now) == nil)
    }
}

/// `rate_limit` buckets, on an injected clock.
struct TokenBucketsTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aBurstPassesThenTheRateRefills() {
        var buckets = TokenBuckets()
        let limit = RateLimitPolicy(requestsPerSecond: 2, burst: 3, per: .client)
        let key = TokenBuckets.Key(policy: "p", client: "billing")
        #expect((0..<3).map { _ in buckets.admit(key, limit: limit, now: Self.now) } == [nil, nil, nil])
        #expect(buckets.admit(key, limit: limit, now: Self.now) == 1)
        #expect(buckets.admit(TokenBuckets.Key(policy: "p", client: "reports"), limit: limit, now: Self.now) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(0.5)) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(0.5)) == 1)
    }

    @Test func aSlowRateSaysHowLongToWait() {
        var buckets = TokenBuckets()
        let limit = RateLimitPolicy(requestsPerSecond: 0.1, burst: 1, per: .policy)
        let key = TokenBuckets.Key(policy: "p", client: "")
        #expect(buckets.admit(key, limit: limit, now: Self.now) == nil)
        #expect(buckets.admit(key, limit: limit, now: Self.now) == 10)
        #expect(buckets.admit(key, limit: limit, now: Self.now.addingTimeInterval(4)) == 6)
    }
}
