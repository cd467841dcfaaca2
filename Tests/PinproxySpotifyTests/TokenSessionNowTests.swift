import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

/// `TokenSession.tokenNow`, the answer the exchange asks for on its event
/// loop before it starts a task: the cached token while it is valid, else
/// nothing (and nothing started: the asynchronous `token(timeout:)` decides).
extension TokenSessionTests {
    @Test func aColdCacheHasNoTokenNowAndStartsNoRefresh() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(endpoint: endpoint)
        #expect(tokens.tokenNow() == nil)
        #expect(tokens.state.withLockedValue { $0.refresh } == .idle)
        let fetched = try await tokens.token(timeout: .seconds(20))
        let now = try #require(tokens.tokenNow())
        #expect(now.reveal() == fetched.reveal())
        #expect(now.generation == fetched.generation)
        #expect(endpoint.callCount == 1)
    }

    @Test func pastTheSoftDeadlineItServesTheCachedTokenAndLaunchesOneRefresh() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600))
        let tokens = make(endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        clock.advance(by: 301)  // refresh_before 5m of a 10-minute token: due, still valid
        endpoint.hold()
        for _ in 0..<5 { #expect(tokens.tokenNow()?.generation == 1) }
        #expect(await pollUntil { endpoint.callCount == 2 })
        #expect(endpoint.maxConcurrentCalls == 1)
        endpoint.release()
        #expect(await pollUntil { tokens.tokenNow()?.generation == 2 })
        #expect(endpoint.callCount == 2)
    }

    /// A fault's credentials are files: their check is left to the waiting
    /// path, off the event loop, and the cached token serves at once again
    /// once it is done.
    @Test func aDueCheckOfAFaultsCredentialsIsLeftToTheWaitingPath() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600))
        let tokens = make(endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        endpoint.script(.status(400, json: #"{"error": "invalid_client"}"#))
        clock.advance(by: 301)  // the background refresh is due, and fails for good
        #expect(tokens.tokenNow()?.generation == 1)
        #expect(await pollUntil { tokens.status == .misconfigured(reason: "invalid_client") })
        clock.advance(by: 2)  // the fault's check is due: not on the loop
        #expect(tokens.tokenNow() == nil)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        #expect(tokens.tokenNow()?.generation == 1)
        #expect(endpoint.callCount == 2)
    }

    @Test func anExpiredTokenIsNotServedNow() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600))
        let tokens = make(endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        clock.advance(by: 601)
        #expect(tokens.tokenNow() == nil)
        // The waiting path still gets a new one.
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 2)
    }
}
