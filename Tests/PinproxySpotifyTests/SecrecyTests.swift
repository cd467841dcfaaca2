import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

/// docs/contract.md §7: tokens and secrets never appear in logs or errors.
@Suite("Tokens and secrets stay out of logs and descriptions")
struct SecrecyTests {
    static let secret = "SECRET-7f3a9c"

    @Test func nothingSecretIsLoggedOrDescribed() async throws {
        let clock = TestClock()
        let logs = LogCapture()
        let dir = try TemporaryDirectory()
        let file = try dir.write("user.token", "refresh-0\n")
        let endpoint = FakeTokenEndpoint(clock: clock, fallback: .grant(expiresIn: 600, rotate: true))
        // Every path that logs: success with rotation, 500, unreachable, 429, invalid_client, invalid_grant.
        endpoint.script(.grant(expiresIn: 600, rotate: true), .status(500, json: #"{"error": "server_error", "error_description": "refresh-0 access-1"}"#),
                        .unreachable, .status(429, json: "{}", headers: [("Retry-After", "0")]))
        let config = SpotifySession(name: "user", flow: .refreshToken, clientID: "client-id-1", clientSecret: .inline(Secret(Self.secret)),
                                    refreshTokenFile: file)
        let tokens = TokenSession(config: config, endpoint: endpoint, clock: clock.function, logger: logs.logger)
        var described: [String] = []
        let first = try await tokens.token(timeout: .seconds(20))
        described += [first.description, String(reflecting: first), "\(first)"]
        var dumped = ""
        dump(first, to: &dumped)
        described.append(dumped)
        // Past the soft deadline (lifetime 600 s: 300 s ahead): retries run while the
        // token serves. A long lifetime, because the loop below pushes the test clock
        // ahead and a loaded machine may let it run far before the retries finish.
        clock.advance(by: 301)
        _ = try await tokens.token(timeout: .seconds(20))
        #expect(await pollUntil(timeout: 30) {
            clock.advance(by: 0.05)  // through the backoff without waiting it out
            return tokens.state.withLockedValue { $0.cached?.generation } == 2
        })
        #expect(endpoint.callCount == 5)
        tokens.invalidate(generation: 1)
        tokens.invalidate(generation: 2)
        endpoint.setFallback(.status(400, json: #"{"error": "invalid_grant"}"#))
        clock.advance(by: 10)
        do { _ = try await tokens.token(timeout: .seconds(20)) } catch { described.append("\(error)") }
        described.append(tokens.status.description)
        endpoint.setFallback(.status(400, json: #"{"error": "invalid_client"}"#))
        try dir.write("user.token", "refresh-x\n")
        clock.advance(by: 2)
        do { _ = try await tokens.token(timeout: .seconds(20)) } catch { described.append("\(error)") }
        described.append(tokens.status.description)
        described += [TokenError.timedOut, .invalidClient, .rateLimited(until: clock.now)].map(\.description)

        let issued = (1...endpoint.callCount).flatMap { ["access-\($0)", "refresh-\($0)"] } + ["refresh-0", "refresh-x", Self.secret]
        let everything = logs.all + described
        // Every kind of line was written: rotation, failures, both faults.
        for marker in ["rotated", "HTTP 500", "unreachable", "429", "invalid_grant", "invalid_client"] {
            #expect(logs.all.contains { $0.contains(marker) }, "no log line mentions \(marker)")
        }
        for line in everything {
            for value in issued {
                #expect(!line.contains(value), "\(value) leaked into: \(line)")
            }
        }
    }
}
