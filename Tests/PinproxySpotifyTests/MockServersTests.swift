import Foundation
import Logging
import PinproxyPolicy
import PinproxyTestSupport
import Testing
@testable import PinproxySpotify

/// curl against the mocks: the shapes the proxy's end-to-end tests rely on.
@Suite("MockAccounts and MockWebAPI answer curl like Spotify", .blockingWaits)
struct MockServersTests {
    struct Curl {
        let root: String

        /// (status, headers lowercased, body)
        func call(_ url: String, _ extra: [String]) throws -> (Int, [String: String], String) {
            let result = try ChildProcess.runSeparately("curl", ["-sS", "-i", "--cacert", root, "--max-time", "10"] + extra + [url])
            #expect(result.status == 0, "curl failed: \(result.stderr)")
            let text = result.stdout.replacingOccurrences(of: "\r\n", with: "\n")
            let split = text.range(of: "\n\n")!
            let lines = text[..<split.lowerBound].split(separator: "\n")
            let status = Int(lines[0].split(separator: " ")[1])!
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                if let colon = line.firstIndex(of: ":") {
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
            }
            return (status, headers, String(text[split.upperBound...]))
        }

        func json(_ body: String) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
    }

    @Test func accountsAndWebAPIFollowTheProtocol() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
        defer { accounts.stop(); api.stop() }
        let curl = Curl(root: pki.rootCertificate)
        let token = accounts.baseURL + "/api/token"
        let basic = ["-u", "mock-client-id:mock-client-secret"]

        // client_credentials
        var (status, headers, body) = try curl.call(token, basic + ["-d", "grant_type=client_credentials"])
        #expect(status == 200)
        #expect(headers["content-type"] == "application/json")
        let granted = curl.json(body)
        let access = try #require(granted["access_token"] as? String)
        #expect((granted["token_type"] as? String) == "Bearer")
        #expect((granted["expires_in"] as? Int) == 3600)
        #expect(granted["refresh_token"] == nil)

        // Refusals: wrong secret, JSON body, missing grant type, wrong method.
        (status, _, body) = try curl.call(token, ["-u", "mock-client-id:wrong", "-d", "grant_type=client_credentials"])
        #expect(status == 400)
        #expect((curl.json(body)["error"] as? String) == "invalid_client")
        #expect(curl.json(body)["error_description"] is String)
        (status, _, _) = try curl.call(token, basic + ["-H", "Content-Type: application/json", "-d", #"{"grant_type":"client_credentials"}"#])
        #expect(status == 415)
        (status, _, body) = try curl.call(token, basic + ["-d", "x=1"])
        #expect(status == 400)
        #expect((curl.json(body)["error"] as? String) == "unsupported_grant_type")
        (status, _, _) = try curl.call(token, ["-X", "GET"])
        #expect(status == 405)

        // refresh_token, PKCE (client_id in the body), with rotation.
        accounts.update { $0.rotateRefreshTokens = true }
        let seed = accounts.issueRefreshToken()
        (status, _, body) = try curl.call(token, ["-d", "grant_type=refresh_token", "--data-urlencode", "refresh_token=\(seed)", "-d", "client_id=mock-client-id"])
        #expect(status == 200)
        let rotated = try #require(curl.json(body)["refresh_token"] as? String)
        #expect(rotated == accounts.counters.lastIssuedRefreshToken)
        #expect(!accounts.isValidRefreshToken(seed))
        (status, _, body) = try curl.call(token, basic + ["-d", "grant_type=refresh_token", "--data-urlencode", "refresh_token=\(seed)"])
        #expect(status == 400)
        #expect((curl.json(body)["error"] as? String) == "invalid_grant")

        // authorization_code with PKCE S256.
        let verifier = "a-verifier-of-enough-length-0123456789-abcdefghijklmnop"
        accounts.addAuthorizationCode("code-1", redirectURI: "http://127.0.0.1:8765/callback",
                                      codeChallenge: MockAccounts.pkceChallenge(verifier: verifier))
        (status, _, body) = try curl.call(token, ["-d", "grant_type=authorization_code", "-d", "code=code-1",
                                                  "--data-urlencode", "redirect_uri=http://127.0.0.1:8765/callback",
                                                  "-d", "client_id=mock-client-id", "-d", "code_verifier=\(verifier)"])
        #expect(status == 200)
        #expect(curl.json(body)["refresh_token"] is String)

        // Scripted failures.
        accounts.update { $0.rateLimitNext = 1; $0.retryAfter = 7; $0.failNext = 1 }
        (status, _, _) = try curl.call(token, basic + ["-d", "grant_type=client_credentials"])
        #expect(status == 500)
        (status, headers, _) = try curl.call(token, basic + ["-d", "grant_type=client_credentials"])
        #expect(status == 429)
        #expect(headers["retry-after"] == "7")
        #expect(accounts.counters.byGrantType["client_credentials"] == 4)  // the 415 never reached the grant logic
        #expect(accounts.counters.byGrantType["refresh_token"] == 2)

        // The Web API.
        let me = api.baseURL + "/v1/me"
        (status, _, body) = try curl.call(me, ["-H", "Authorization: Bearer \(access)"])
        #expect(status == 200)
        #expect((curl.json(body)["path"] as? String) == "/v1/me")
        (status, _, body) = try curl.call(me, ["-H", "Authorization: Bearer evil"])
        #expect(status == 401)
        let apiError = try #require(curl.json(body)["error"] as? [String: Any])
        #expect((apiError["status"] as? Int) == 401)
        #expect(apiError["message"] is String)
        (status, _, _) = try curl.call(me, [])
        #expect(status == 401)
        api.update { $0.unauthorizedNext = 1 }
        (status, _, _) = try curl.call(me, ["-H", "Authorization: Bearer \(access)"])
        #expect(status == 401)
        api.update { $0.forbidden = true }
        (status, _, _) = try curl.call(me, ["-H", "Authorization: Bearer \(access)"])
        #expect(status == 403)
        api.update { $0.forbidden = false; $0.rateLimitNext = 1; $0.retryAfter = 3 }
        (status, headers, _) = try curl.call(me, ["-H", "Authorization: Bearer \(access)"])
        #expect(status == 429)
        #expect(headers["retry-after"] == "3")
        accounts.expireAccessTokens()
        (status, _, _) = try curl.call(me, ["-H", "Authorization: Bearer \(access)"])
        #expect(status == 401)
        #expect(api.authorizationHeaders == ["Bearer \(access)", "Bearer evil", nil] + Array(repeating: "Bearer \(access)", count: 4))

        // Down: connections are closed unanswered.
        accounts.update { $0.down = true }
        let down = try ChildProcess.runSeparately("curl", ["-sS", "--cacert", pki.rootCertificate, "--max-time", "5", "-u", "a:b",
                                                           "-d", "grant_type=client_credentials", token])
        #expect(down.status != 0)
    }

    /// The session module against MockAccounts, through a TokenEndpoint made of curl:
    /// the real JSON shapes, Basic auth and rotation on disk.
    @Test func aSessionRefreshesAgainstMockAccounts() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
        defer { accounts.stop() }
        accounts.update { $0.rotateRefreshTokens = true }
        let file = try dir.write("user.token", accounts.issueRefreshToken() + "\n")
        let endpoint = CurlTokenEndpoint(url: accounts.baseURL + "/api/token", caFile: pki.rootCertificate, scratch: dir)
        let config = SpotifySession(name: "user", flow: .refreshToken, clientID: accounts.clientID,
                                    clientSecret: .inline(Secret(accounts.clientSecret)), refreshTokenFile: file)
        let tokens = TokenSession(config: config, endpoint: endpoint, logger: Logger(label: "test"))
        let first = try await tokens.token(timeout: .seconds(10))
        #expect(accounts.isValidAccessToken(first.reveal()))
        let stored = try #require(accounts.counters.lastIssuedRefreshToken)
        #expect(fileBytes(file) == Array((stored + "\n").utf8))
        #expect(TextFile.permissions(file) == 0o600)
        tokens.invalidate(generation: first.generation)
        let second = try await tokens.token(timeout: .seconds(10))
        #expect(second.generation == 2)
        #expect(accounts.counters.byGrantType["refresh_token"] == 2)
        accounts.update { $0.invalidGrant = true }
        tokens.invalidate(generation: 2)
        await #expect(throws: TokenError.needsReauthorization(reason: "invalid_grant")) { try await tokens.token(timeout: .seconds(10)) }
        #expect(fileBytes(file) == Array((accounts.counters.lastIssuedRefreshToken! + "\n").utf8))
    }
}

/// A TokenEndpoint over the curl CLI, for tests only (the proxy's own goes
/// through its pinned upstream path).
struct CurlTokenEndpoint: TokenEndpoint {
    let url: String
    let caFile: String
    let scratch: TemporaryDirectory

    struct Failed: Error {}

    func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse {
        let bodyFile = scratch.file("form-\(UUID().uuidString)")
        try FormURLEncoding.encode(form).write(toFile: bodyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        var arguments = ["-sS", "-i", "--cacert", caFile, "--max-time", "10",
                         "-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary", "@" + bodyFile]
        if let basicAuth { arguments += ["-u", "\(basicAuth.user):\(basicAuth.password)"] }
        // On a thread of its own: the session calls this from its refresh
        // task, which runs on the cooperative pool whatever the test's trait.
        let command = arguments + [url]
        let result = try await onOwnThread { try ChildProcess.runSeparately("curl", command) }
        guard result.status == 0 else { throw Failed() }
        let text = result.stdout.replacingOccurrences(of: "\r\n", with: "\n")
        guard let split = text.range(of: "\n\n") else { throw Failed() }
        let lines = text[..<split.lowerBound].split(separator: "\n")
        guard let status = Int(lines[0].split(separator: " ")[1]) else { throw Failed() }
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return TokenEndpointResponse(status: status, headers: headers, body: Array(text[split.upperBound...].utf8))
    }
}
