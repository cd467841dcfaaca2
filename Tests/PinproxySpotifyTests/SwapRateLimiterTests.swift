import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import PinproxySpotify

@Suite("Swap rate limits")
struct SwapRateLimiterTests {
    @Test func aBurstThenOneASecondPerClient() {
        let now = NIOLockedValueBox(Date(timeIntervalSince1970: 1_000))
        let limiter = SwapRateLimiter(burst: 3, perSecond: 0.5, clock: { now.withLockedValue { $0 } })
        #expect((0..<3).map { _ in limiter.take(client: "a") } == [.allowed, .allowed, .allowed])
        #expect(limiter.take(client: "a") == .limited(retryAfter: 2))
        #expect(limiter.take(client: "b") == .allowed, "another client has its own bucket")
        now.withLockedValue { $0 += 1 }
        #expect(limiter.take(client: "a") == .limited(retryAfter: 1))
        now.withLockedValue { $0 += 1 }
        #expect(limiter.take(client: "a") == .allowed)
        #expect(limiter.take(client: "a") == .limited(retryAfter: 2))
    }

    @Test func idleClientsAreForgottenPastTheCap() {
        let now = NIOLockedValueBox(Date(timeIntervalSince1970: 1_000))
        let limiter = SwapRateLimiter(burst: 1, perSecond: 1, maxClients: 2, clock: { now.withLockedValue { $0 } })
        _ = limiter.take(client: "a")
        _ = limiter.take(client: "b")
        now.withLockedValue { $0 += 5 }
        _ = limiter.take(client: "c")
        #expect(limiter.take(client: "c") == .limited(retryAfter: 1), "the newest bucket is kept")
        #expect(limiter.take(client: "a") == .allowed)
    }
}
