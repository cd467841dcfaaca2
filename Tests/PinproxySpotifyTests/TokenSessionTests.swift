import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

@Suite("Token sessions against a fake token endpoint")
struct TokenSessionTests {
    let clock = TestClock()
    let logs = LogCapture()
    let recorder = EventRecorder()

    func make(_ config: SpotifySession = session(), endpoint: FakeTokenEndpoint) -> TokenSession {
        TokenSession(config: config, endpoint: endpoint, clock: clock.function, events: recorder.hooks, logger: logs.logger)
    }

    @Test func fiftyConcurrentCallersOnAColdCacheMakeOneRequest() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, delay: .milliseconds(100))
        let tokens = make(endpoint: endpoint)
        let generations = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { try await tokens.token(timeout: .seconds(20)).generation } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(generations == Array(repeating: 1, count: 50))
        #expect(endpoint.callCount == 1)
        #expect(tokens.status == .ok)
        #expect(recorder.results == [.success])
    }

    @Test func clientCredentialsSendsBasicAuthAndTheGrantType() async throws {
        let dir = try TemporaryDirectory()
        let secretFile = try dir.write("secret", "file-secret-value  \n\n")
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(session(secret: .file(secretFile)), endpoint: endpoint)
        let token = try await tokens.token(timeout: .seconds(20))
        #expect(token.reveal() == "access-1")
        let call = try #require(endpoint.calls.first)
        #expect(call.form.map { "\($0.0)=\($0.1)" } == ["grant_type=client_credentials"])
        #expect(call.basicAuth?.user == "client-id-1")
        #expect(call.basicAuth?.password == "file-secret-value")
    }

    @Test func refreshTokenFlowWithoutSecretIsPKCE() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "stored-refresh\n")
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(session(.refreshToken, secret: nil, refreshTokenFile: file), endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        let call = try #require(endpoint.calls.first)
        #expect(call.basicAuth == nil)
        #expect(call.field("grant_type") == "refresh_token")
        #expect(call.field("refresh_token") == "stored-refresh")
        #expect(call.field("client_id") == "client-id-1")
    }

    @Test func refreshTokenFlowWithSecretUsesBasicAuth() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "stored-refresh\n")
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(session(.refreshToken, refreshTokenFile: file), endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        let call = try #require(endpoint.calls.first)
        #expect(call.basicAuth?.password == "s3cret-client-secret")
        #expect(call.field("client_id") == nil)
    }

    @Test func pastTheSoftDeadlineTheCachedTokenServesWhileOneBackgroundRefreshRuns() async throws {
        // The test clock is real time plus an offset: a lifetime of minutes leaves
        // the loop below ample real time before expiry, even on a loaded machine.
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600))
        let tokens = make(endpoint: endpoint)
        let first = try await tokens.token(timeout: .seconds(20))
        #expect(first.generation == 1)
        // refresh_before 5m, lifetime 10 min: the soft deadline is 5 min before expiry.
        clock.advance(by: 301)
        endpoint.hold()  // a caller that waited for this refresh would hang until release
        for _ in 0..<20 {
            let served = try await tokens.token(timeout: .seconds(30))
            #expect(served.generation == 1)
        }
        #expect(await pollUntil { endpoint.callCount == 2 })
        #expect(endpoint.callCount == 2)
        #expect(endpoint.maxConcurrentCalls == 1)
        endpoint.release()
        #expect(await pollUntil { tokens.state.withLockedValue { $0.cached?.generation } == 2 })
        clock.advance(by: 300)  // past the first token's expiry
        let after = try await tokens.token(timeout: .seconds(20))
        #expect(after.generation == 2)
        #expect(endpoint.callCount == 2)
    }

    @Test func rateLimitedRefreshWaitsForRetryAfterWhileTheCachedTokenServes() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        clock.advance(by: 3400)  // past the soft deadline (3600 s lifetime, 5 m ahead)
        endpoint.script(.status(429, json: "{}", headers: [("Retry-After", "2")]))
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        #expect(await pollUntil { recorder.results.count == 2 })
        #expect(recorder.results == [.success, .rateLimited])
        // The cached token serves while the retry waits. The test clock runs in
        // real time too, so on a loaded machine the retry may already have come:
        // the recorded call times below prove it waited for Retry-After.
        for _ in 0..<12 {
            let generation = try await tokens.token(timeout: .seconds(20)).generation
            #expect(generation == 1 || endpoint.callCount >= 3, "a new token only after the retry")
        }
        clock.advance(by: 2)  // past Retry-After, which is longer than any first jittered backoff (≤ 1 s)
        try #require(await pollUntil { endpoint.callCount == 3 })
        // Indexed only after the poll saw the third call: a failed poll ends
        // this test, not the whole test process.
        let calls = endpoint.calls
        try #require(calls.count >= 3)
        #expect(calls[2].at.timeIntervalSince(calls[1].at) >= 2)
        #expect(await pollUntil { tokens.state.withLockedValue { $0.cached?.generation } == 2 })
    }

    @Test func failedRefreshBacksOffAndRetriesWhileTheCachedTokenServes() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        clock.advance(by: 3400)
        endpoint.script(.status(500, json: "{}"), .unreachable)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        // Each retry only after its jittered backoff (≤ 1 s, then ≤ 2 s of the clock).
        #expect(await pollUntil(timeout: 30) { recorder.results.count == 4 })
        #expect(recorder.results == [.success, .failure, .failure, .success])
        #expect(endpoint.callCount == 4)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 2)
        #expect(endpoint.maxConcurrentCalls == 1)
    }

    @Test func withoutATokenAndTheEndpointDownCallersTimeOut() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .unreachable)
        let tokens = make(endpoint: endpoint)
        await #expect(throws: TokenError.timedOut) { try await tokens.token(timeout: .milliseconds(400)) }
        #expect(endpoint.callCount >= 1)
        #expect(tokens.status == .unavailable(reason: "token endpoint unreachable"))
        // The accounts service recovers: the next caller gets a token.
        endpoint.setFallback(.grant(expiresIn: 3600))
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
    }

    @Test func aRetryAfterBeyondTheCallersTimeoutFailsFast() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .status(429, json: "{}", headers: [("Retry-After", "30")]))
        let tokens = make(endpoint: endpoint)
        await #expect(throws: TokenError.self) { try await tokens.token(timeout: .seconds(20)) }
        do {
            _ = try await tokens.token(timeout: .seconds(20))
            Issue.record("expected rateLimited")
        } catch TokenError.rateLimited(let until) {
            #expect(until.timeIntervalSince(clock.now) > 25)
        }
        #expect(endpoint.callCount == 1)
    }

    @Test func invalidClientIsNotLoopedOn() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .status(400, json: #"{"error": "invalid_client", "error_description": "Invalid client secret"}"#))
        let tokens = make(endpoint: endpoint)
        for _ in 0..<20 {
            await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        }
        // Half the minute passes on the clock (real time passes too, so not all
        // of it): a caller then still fails fast, without a call.
        clock.advance(by: 30)
        await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        #expect(endpoint.callCount == 1)
        #expect(tokens.status == .misconfigured(reason: "invalid_client"))
        #expect(recorder.results == [.invalidClient])
        #expect(logs.all.filter { $0.hasPrefix("error") && $0.contains("invalid_client") }.count == 1)
        // A minute later one call is allowed, then fail fast again.
        clock.advance(by: 31)
        await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        #expect(endpoint.callCount == 2)
    }

    @Test func aFixedSecretFileEndsInvalidClientWithinASecond() async throws {
        let dir = try TemporaryDirectory()
        let secretFile = try dir.write("secret", "wrong\n")
        let endpoint = FakeTokenEndpoint(clock: clock)
        endpoint.script(.status(400, json: #"{"error": "invalid_client"}"#))
        let tokens = make(session(secret: .file(secretFile)), endpoint: endpoint)
        await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        clock.advance(by: 2)
        await #expect(throws: TokenError.invalidClient) { try await tokens.token(timeout: .seconds(20)) }
        #expect(endpoint.callCount == 1)
        try dir.write("secret", "right\n")
        clock.advance(by: 2)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        #expect(endpoint.calls.last?.basicAuth?.password == "right")
        #expect(tokens.status == .ok)
    }

    @Test func invalidGrantNeedsReauthorizationAndKeepsTheFile() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "old-refresh\n")
        let before = fileBytes(file)
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .status(400, json: #"{"error": "invalid_grant", "error_description": "Refresh token revoked"}"#))
        let tokens = make(session(.refreshToken, refreshTokenFile: file), endpoint: endpoint)
        await #expect(throws: TokenError.needsReauthorization(reason: "invalid_grant")) { try await tokens.token(timeout: .seconds(20)) }
        #expect(tokens.status == .needsReauthorization(reason: "invalid_grant"))
        #expect(recorder.results == [.invalidGrant])
        #expect(fileBytes(file) == before)
        clock.advance(by: 600)  // no periodic retry for a dead refresh token
        for _ in 0..<10 {
            await #expect(throws: TokenError.needsReauthorization(reason: "invalid_grant")) { try await tokens.token(timeout: .seconds(20)) }
        }
        #expect(endpoint.callCount == 1)
        #expect(fileBytes(file) == before)
        // `pinproxy spotify login` writes a new token: the next caller uses it.
        endpoint.setFallback(.grant(expiresIn: 3600))
        try dir.write("user.token", "new-refresh\n")
        clock.advance(by: 2)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        #expect(endpoint.calls.last?.field("refresh_token") == "new-refresh")
    }

    @Test func aMissingRefreshTokenFileNeedsReauthorizationWithoutACall() async throws {
        let dir = try TemporaryDirectory()
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(session(.refreshToken, refreshTokenFile: dir.file("absent.token")), endpoint: endpoint)
        await #expect(throws: TokenError.self) { try await tokens.token(timeout: .seconds(20)) }
        guard case .needsReauthorization(let reason) = tokens.status else { Issue.record("status \(tokens.status)"); return }
        #expect(reason.contains("spotify login app"))
        #expect(endpoint.callCount == 0)
    }

    @Test func rotationWritesTheNewRefreshTokenBeforeTheAccessTokenIsReturned() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "refresh-0\n")
        chmod(file, 0o644)
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 3600, rotate: true))
        let seenAtRotation = NIOLockedBox<[String]>([])
        recorder.onIssued.withLockedValue { $0 = { seenAtRotation.append(String(decoding: fileBytes(file), as: UTF8.self)) } }
        let tokens = make(session(.refreshToken, refreshTokenFile: file), endpoint: endpoint)
        let token = try await tokens.token(timeout: .seconds(20))
        #expect(token.reveal() == "access-1")
        #expect(fileBytes(file) == Array("refresh-1\n".utf8))
        #expect(TextFile.permissions(file) == 0o600)
        #expect(endpoint.calls[0].field("refresh_token") == "refresh-0")
        // The hook for the rotation ran before `token` returned, with the new file in place.
        #expect(seenAtRotation.all.last == "refresh-1\n")
        #expect(recorder.issued.count >= 2)  // the file's mtime at start, then the rotation
        tokens.invalidate(generation: 1)
        _ = try await tokens.token(timeout: .seconds(20))
        #expect(endpoint.calls[1].field("refresh_token") == "refresh-1")
        #expect(fileBytes(file) == Array("refresh-2\n".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["user.token"])  // no temp files left
    }

    @Test func aReplyWithoutRefreshTokenLeavesTheFileByteIdentical() async throws {
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "refresh-0  \n\n")
        let before = fileBytes(file)
        let mtime = try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 3600, rotate: false))
        let tokens = make(session(.refreshToken, refreshTokenFile: file), endpoint: endpoint)
        _ = try await tokens.token(timeout: .seconds(20))
        #expect(endpoint.calls[0].field("refresh_token") == "refresh-0")
        #expect(fileBytes(file) == before)
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date == mtime)
        let age = try #require(mtime)
        #expect(!recorder.issued.isEmpty)
        #expect(recorder.issued.allSatisfy { abs($0.timeIntervalSince(age)) < 0.001 })  // only the file's own age
    }

    @Test func invalidateDropsOnlyTheCurrentGeneration() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        let tokens = make(endpoint: endpoint)
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 1)
        tokens.invalidate(generation: 1)
        let generations = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 { group.addTask { try await tokens.token(timeout: .seconds(20)).generation } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(generations == Array(repeating: 2, count: 20))
        #expect(endpoint.callCount == 2)
        tokens.invalidate(generation: 1)  // a late 401 for the old token
        #expect(try await tokens.token(timeout: .seconds(20)).generation == 2)
        #expect(endpoint.callCount == 2)
    }

    @Test func anUnknownOAuthErrorIsAConfigurationErrorButA5xxIsRetried() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .status(400, json: #"{"error": "unsupported_grant_type"}"#))
        let tokens = make(endpoint: endpoint)
        await #expect(throws: TokenError.misconfigured(reason: "unsupported_grant_type")) { try await tokens.token(timeout: .seconds(20)) }
        #expect(tokens.status == .misconfigured(reason: "unsupported_grant_type"))
        #expect(endpoint.callCount == 1)
    }

    @Test func aHungTokenCallIsAbandonedAndRetried() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        endpoint.hold()
        // The endpoint timeout runs on the injected clock: the call is abandoned
        // when the test moves the clock past it, however slowly the machine runs.
        let tokens = TokenSession(config: session(), endpoint: endpoint, clock: clock.function, events: recorder.hooks,
                                  logger: logs.logger, endpointTimeout: .seconds(45))
        let waiting = Task { try await tokens.token(timeout: .seconds(60)) }
        #expect(await pollUntil { endpoint.callCount == 1 })
        #expect(recorder.results.isEmpty)
        clock.advance(by: 46)
        #expect(await pollUntil { recorder.results == [.failure] })
        #expect(logs.all.contains { $0.contains("did not answer within 45s") })
        endpoint.release()
        #expect(try await waiting.value.generation == 1)
        #expect(endpoint.callCount == 2)
    }

    @Test func cancellingAWaiterLeavesTheOthers() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock)
        endpoint.hold()
        let tokens = make(endpoint: endpoint)
        let cancelled = Task { try await tokens.token(timeout: .seconds(30)) }
        let patient = Task { try await tokens.token(timeout: .seconds(30)) }
        #expect(await pollUntil { endpoint.callCount == 1 })
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        endpoint.release()
        #expect(try await patient.value.generation == 1)
    }

    @Test func readinessDetailsNameUnhealthySessions() async throws {
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .status(400, json: #"{"error": "invalid_grant"}"#))
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "r\n")
        var user = session(.refreshToken, refreshTokenFile: file)
        user.name = "user"
        let config = SpotifyConfig(accounts: "https://accounts.example", tokenTimeout: .seconds(10),
                                   sessions: ["app": session(), "user": user], swap: nil)
        let all = TokenSessions(config: config, endpoint: endpoint, clock: clock.function, logger: logs.logger)
        #expect(all.readinessDetails.isEmpty)
        await #expect(throws: TokenError.self) { try await all.session(named: "user")!.token(timeout: .seconds(20)) }
        #expect(all.readinessDetails == ["spotify session user needs re-authorisation (invalid_grant)"])
        #expect(all.session(named: "nope") == nil)
    }
}

/// A tiny locked array for closures that outlive a test's locals.
final class NIOLockedBox<T: Sendable>: Sendable {
    private let box: NIOLockedValueBox<T>
    init(_ value: T) { box = NIOLockedValueBox(value) }
    var all: T { box.withLockedValue { $0 } }
    func append<E>(_ element: E) where T == [E] { box.withLockedValue { $0.append(element) } }
}
