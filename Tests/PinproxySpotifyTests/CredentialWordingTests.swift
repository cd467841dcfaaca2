import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

/// A `credentials:` entry's token session speaks of "credential NAME" and
/// its token endpoint, never of Spotify; a `spotify.sessions` entry keeps the
/// Spotify wording its operators' alerts match on.
@Suite("Token session wording per kind")
struct CredentialWordingTests {
    let clock = TestClock()

    /// A session that refreshes once (rotating), fails once, then is refused `invalid_grant`.
    func run(_ config: SpotifySession, logs: LogCapture) async throws -> [String] {
        let endpoint = FakeTokenEndpoint(clock: clock)
        endpoint.script(.grant(expiresIn: 3600, rotate: true))
        endpoint.setFallback(.status(400, json: #"{"error": "invalid_grant"}"#))
        let tokens = TokenSession(config: config, endpoint: endpoint, clock: clock.function, events: EventRecorder().hooks, logger: logs.logger)
        _ = try await tokens.token(timeout: .seconds(20))
        tokens.invalidate(generation: 1)
        var errors: [String] = []
        do {
            _ = try await tokens.token(timeout: .seconds(20))
        } catch {
            errors.append("\(error)")
        }
        return errors
    }

    func refreshSession(_ dir: TemporaryDirectory, tokenURL: String?) throws -> SpotifySession {
        var config = session(.refreshToken, refreshTokenFile: try dir.write("rt.token", "seed\n"))
        config.name = "idp"
        config.tokenURL = tokenURL
        return config
    }

    @Test func aGenericCredentialIsNamedAsACredential() async throws {
        let dir = try TemporaryDirectory()
        let logs = LogCapture()
        let errors = try await run(try refreshSession(dir, tokenURL: "https://idp.example/token"), logs: logs)
        let lines = logs.all
        #expect(lines.contains { $0.contains("refresh token of credential idp rotated") }, "\(lines)")
        #expect(lines.contains { $0.contains("access token of credential idp refreshed") }, "\(lines)")
        #expect(lines.contains { $0.contains("the token endpoint of credential idp refused the refresh token (invalid_grant)") }, "\(lines)")
        #expect(lines.allSatisfy { $0.contains("credential=idp") }, "\(lines)")
        for text in lines + errors {
            #expect(!text.contains("Spotify") && !text.contains("spotify") && !text.contains("accounts service"), "\(text)")
        }
        #expect(errors == ["needs re-authorisation: invalid_grant"])
    }

    @Test func aSpotifySessionKeepsTheSpotifyWording() async throws {
        let dir = try TemporaryDirectory()
        let logs = LogCapture()
        _ = try await run(try refreshSession(dir, tokenURL: nil), logs: logs)
        let lines = logs.all
        #expect(lines.contains { $0.contains("Spotify refresh token rotated") }, "\(lines)")
        #expect(lines.contains { $0.contains("Spotify access token refreshed") }, "\(lines)")
        #expect(lines.contains { $0.contains("the accounts service refused the refresh token (invalid_grant)") }, "\(lines)")
        #expect(lines.allSatisfy { $0.contains("spotify_session=idp") }, "\(lines)")
    }
}
