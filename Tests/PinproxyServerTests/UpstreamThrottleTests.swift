import Foundation
import NIOConcurrencyHelpers
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

    /// Windows from other replicas (the session store): the later end wins,
    /// a past one is ignored, and only a change is reported (to publish or log).
    @Test func anotherReplicasWindowIsAdoptedWhenItEndsLater() {
        var windows = ThrottleWindows()
        let opened = windows.record(credential: "idp", host: "API.example.com", retryAfter: "5", now: Self.now)
        #expect(opened == ThrottleWindow(credential: "idp", host: "api.example.com", until: Self.now.addingTimeInterval(5)))
        #expect(windows.record(credential: "idp", host: "api.example.com", retryAfter: "2", now: Self.now) == nil, "a shorter one changes nothing")
        #expect(windows.adopt(ThrottleWindow(credential: "idp", host: "api.example.com", until: Self.now.addingTimeInterval(4)), now: Self.now) == nil)
        let later = ThrottleWindow(credential: "idp", host: "api.example.com", until: Self.now.addingTimeInterval(9))
        #expect(windows.adopt(later, now: Self.now) == later)
        #expect(windows.remaining(credential: "idp", host: "api.example.com", now: Self.now) == 9)
        #expect(windows.adopt(ThrottleWindow(credential: "b", host: "h", until: Self.now.addingTimeInterval(-1)), now: Self.now) == nil)
        #expect(windows.remaining(credential: "b", host: "h", now: Self.now) == nil)
    }

    /// The proxy's windows hand what they open to the store, and take what other replicas opened.
    @Test func theSharedThrottlePublishesWhatItOpensAndAdoptsWhatOthersOpened() {
        let published = NIOLockedValueBox<[ThrottleWindow]>([])
        let throttle = UpstreamThrottle(clock: { Self.now })
        throttle.share { window in published.withLockedValue { $0.append(window) } }
        throttle.record(credential: "idp", host: "api.example.com", retryAfter: "3")
        throttle.record(credential: "idp", host: "api.example.com", retryAfter: "1")
        #expect(published.withLockedValue { $0 } == [ThrottleWindow(credential: "idp", host: "api.example.com", until: Self.now.addingTimeInterval(3))])
        let other = ThrottleWindow(credential: "gh", host: "api.github.com", until: Self.now.addingTimeInterval(7))
        #expect(throttle.adopt([other]) == [other])
        #expect(throttle.remaining(credential: "gh", host: "api.github.com") == 7)
        #expect(published.withLockedValue { $0 }.count == 1, "an adopted window is not published back")
    }

    /// `throttle_queue`: up to N wait for a window that ends within the longest wait; the rest are refused.
    @Test func aQueueHoldsUpToNThenRefuses() {
        var windows = ThrottleWindows()
        windows.record(credential: "idp", host: "api", retryAfter: "3", now: Self.now)
        let end = Self.now.addingTimeInterval(3)
        func admit(_ queue: Int, wait: TimeInterval = 5, at now: Date = Self.now) -> ThrottleWindows.Admission {
            windows.admit(credential: "idp", host: "API", queue: queue, longestWait: wait, now: now)
        }
        #expect(admit(0) == .refuse(seconds: 3), "no queue: refused at once")
        #expect(admit(2) == .wait(until: end))
        #expect(admit(2) == .wait(until: end))
        #expect(admit(2) == .refuse(seconds: 3), "the queue is full")
        #expect(windows.waiting.values.reduce(0, +) == 2)
        windows.leave(credential: "idp", host: "api")
        #expect(admit(2, at: Self.now.addingTimeInterval(1)) == .wait(until: end), "a place came free")
        #expect(windows.admit(credential: "other", host: "api", queue: 2, longestWait: 5, now: Self.now) == .send)
        // Once the window passed, everyone goes.
        #expect(admit(0, at: end) == .send)
    }

    @Test func aWindowLongerThanTheLongestWaitIsRefusedNotQueued() {
        var windows = ThrottleWindows()
        windows.record(credential: "idp", host: "api", retryAfter: "30", now: Self.now)
        #expect(windows.admit(credential: "idp", host: "api", queue: 10, longestWait: 5, now: Self.now) == .refuse(seconds: 30))
        #expect(windows.admit(credential: "idp", host: "api", queue: 10, longestWait: 5, now: Self.now.addingTimeInterval(25)) == .wait(until: Self.now.addingTimeInterval(30)))
        #expect(windows.waiting.isEmpty == false)
        windows.leave(credential: "idp", host: "api")
        #expect(windows.waiting.isEmpty)
    }
}
