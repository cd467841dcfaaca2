import Foundation
import NIOConcurrencyHelpers
import PinproxyTLS

/// Spotify's accounts service, locally, over HTTPS (docs/contract.md §7 protocol facts):
/// `POST /api/token`, form-urlencoded only, grants `client_credentials`,
/// `refresh_token` and `authorization_code`; errors as
/// `{"error": code, "error_description": text}`. Switches make it fail,
/// rate limit, refuse refresh tokens or go down; counters say what it saw.
public final class MockAccounts: Sendable {
    public struct Behaviour: Sendable {
        public var expiresIn = 3600
        /// A `refresh_token` grant answers with a new refresh token (the old one is revoked).
        public var rotateRefreshTokens = false
        /// The next N token requests get `failStatus` (after being counted).
        public var failNext = 0
        public var failStatus = 500
        /// The next N token requests get 429 with `Retry-After: retryAfter`.
        public var rateLimitNext = 0
        public var retryAfter = 1
        /// Every `refresh_token` grant gets 400 `invalid_grant` (revoked consent).
        public var invalidGrant = false
        /// Connections are closed without an answer, new and kept-alive alike.
        public var down = false
        /// Spotify answers 400; RFC 6749 allows 401 when Basic auth failed.
        public var invalidClientStatus = 400
        public var tokenType = "Bearer"
        /// `GET /authorize` sends the browser back with `error=access_denied` (the user said no).
        public var denyAuthorization = false
    }

    public struct Counters: Sendable {
        /// Requests that reached the token endpoint's logic (not refused for method, path or content type).
        public var tokenRequests = 0
        public var byGrantType: [String: Int] = [:]
        public var lastIssuedAccessToken: String?
        public var lastIssuedRefreshToken: String?
        /// `GET /authorize` requests answered with a redirect.
        public var authorizeRequests = 0
        /// `refresh_token` grants that presented a refresh token rotation had
        /// already replaced (two replicas forking the rotation would show here).
        public var supersededRefreshTokens = 0
        /// Every access token issued, in order (a test can show each reached the Web API).
        public var issuedAccessTokens: [String] = []
    }

    private struct State {
        var behaviour = Behaviour()
        var counters = Counters()
        var accessTokens: [String: Date] = [:]
        var refreshTokens: Set<String> = []
        /// Refresh tokens rotation replaced (revoked, remembered to count reuse).
        var supersededRefreshTokens: Set<String> = []
        var codes: [String: (redirectURI: String, challenge: String?)] = [:]
        var serial = 0
    }

    public let clientID: String
    public let clientSecret: String
    private let state = NIOLockedValueBox(State())
    private let serverBox = NIOLockedValueBox<MockHTTPSServer?>(nil)
    public var server: MockHTTPSServer { serverBox.withLockedValue { $0! } }
    public var port: Int { server.port }
    /// For `spotify.accounts`.
    public var baseURL: String { server.baseURL }

    public init(chainFile: String, keyFile: String, clientID: String = "mock-client-id", clientSecret: String = "mock-client-secret") async throws {
        self.clientID = clientID
        self.clientSecret = clientSecret
        let state = self.state
        let server = try await MockHTTPSServer(chainFile: chainFile, keyFile: keyFile,
                                               refuse: { state.withLockedValue { $0.behaviour.down } },
                                               handler: { [weak self] request in self?.handle(request) ?? .close })
        serverBox.withLockedValue { $0 = server }
    }

    public func stop() { server.stop() }

    public func update(_ change: (inout Behaviour) -> Void) { state.withLockedValue { change(&$0.behaviour) } }
    public var behaviour: Behaviour { state.withLockedValue { $0.behaviour } }
    public var counters: Counters { state.withLockedValue { $0.counters } }

    /// A refresh token as if a user had just consented (to seed a refresh-token file).
    public func issueRefreshToken() -> String {
        state.withLockedValue { state in
            let token = Self.mint("rt", &state.serial)
            state.refreshTokens.insert(token)
            return token
        }
    }

    /// An authorization code the next `authorization_code` grant may redeem once.
    /// `codeChallenge`: PKCE S256 (base64url of SHA-256 of the verifier).
    public func addAuthorizationCode(_ code: String, redirectURI: String, codeChallenge: String? = nil) {
        state.withLockedValue { $0.codes[code] = (redirectURI, codeChallenge) }
    }

    /// True for an access token this service issued that has not expired (MockWebAPI asks).
    public func isValidAccessToken(_ token: String) -> Bool {
        state.withLockedValue { state in state.accessTokens[token].map { $0 > Date() } ?? false }
    }

    /// One access token stops working (revoked early: the Web API answers 401 to it).
    public func revokeAccessToken(_ token: String) {
        state.withLockedValue { _ = $0.accessTokens.removeValue(forKey: token) }
    }

    /// Every access token issued so far stops working (as if they had expired).
    public func expireAccessTokens() {
        state.withLockedValue { $0.accessTokens = [:] }
    }

    public func isValidRefreshToken(_ token: String) -> Bool {
        state.withLockedValue { $0.refreshTokens.contains(token) }
    }

    // MARK: The endpoint

    private func handle(_ request: MockRequest) -> MockAction {
        state.withLockedValue { state in
            if state.behaviour.down { return .close }
            if request.path == "/authorize", request.method == "GET" { return .respond(authorize(request, &state)) }
            guard request.path == "/api/token" else { return .respond(Self.error(404, "not_found", "Not found")) }
            guard request.method == "POST" else { return .respond(Self.error(405, "invalid_request", "Method not allowed")) }
            let contentType = request.header("Content-Type")?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
            guard contentType == "application/x-www-form-urlencoded" else {
                return .respond(Self.error(415, "invalid_request", "Content type must be application/x-www-form-urlencoded"))
            }
            let form = FormURLEncoding.decode(request.body)
            func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
            let grantType = field("grant_type")
            state.counters.tokenRequests += 1
            state.counters.byGrantType[grantType ?? "", default: 0] += 1

            if state.behaviour.failNext > 0 {
                state.behaviour.failNext -= 1
                return .respond(Self.error(state.behaviour.failStatus, "server_error", "Mock accounts failure"))
            }
            if state.behaviour.rateLimitNext > 0 {
                state.behaviour.rateLimitNext -= 1
                return .respond(MockResponse(status: 429, headers: [("Retry-After", String(state.behaviour.retryAfter))]))
            }
            if let refusal = authenticate(request, body: field("client_id"), grantType: grantType, state.behaviour) {
                return .respond(refusal)
            }
            switch grantType {
            case nil:
                return .respond(Self.error(400, "unsupported_grant_type", "grant_type parameter is missing"))
            case "client_credentials":
                return .respond(grant(&state, refreshToken: nil))
            case "refresh_token":
                if let token = field("refresh_token"), state.supersededRefreshTokens.contains(token) {
                    state.counters.supersededRefreshTokens += 1
                }
                guard !state.behaviour.invalidGrant, let token = field("refresh_token"), state.refreshTokens.contains(token) else {
                    return .respond(Self.error(400, "invalid_grant", "Invalid refresh token"))
                }
                var rotated: String?
                if state.behaviour.rotateRefreshTokens {
                    state.refreshTokens.remove(token)
                    state.supersededRefreshTokens.insert(token)
                    rotated = Self.mint("rt", &state.serial)
                    state.refreshTokens.insert(rotated!)
                }
                return .respond(grant(&state, refreshToken: rotated))
            case "authorization_code":
                guard let code = field("code"), let registered = state.codes.removeValue(forKey: code) else {
                    return .respond(Self.error(400, "invalid_grant", "Invalid authorization code"))
                }
                guard field("redirect_uri") == registered.redirectURI else {
                    return .respond(Self.error(400, "invalid_grant", "Invalid redirect URI"))
                }
                if let challenge = registered.challenge {
                    guard let verifier = field("code_verifier"), Self.pkceChallenge(verifier: verifier) == challenge else {
                        return .respond(Self.error(400, "invalid_grant", "code_verifier was incorrect"))
                    }
                }
                let refresh = Self.mint("rt", &state.serial)
                state.refreshTokens.insert(refresh)
                return .respond(grant(&state, refreshToken: refresh))
            default:
                return .respond(Self.error(400, "unsupported_grant_type", "grant_type parameter is invalid"))
            }
        }
    }

    /// `GET /authorize`: the user consents at once (or refuses, with
    /// `denyAuthorization`) and the browser is sent to `redirect_uri` with a
    /// code registered for the PKCE challenge, and the `state` as given.
    private func authorize(_ request: MockRequest, _ state: inout State) -> MockResponse {
        let query = FormURLEncoding.decode(Array((request.query ?? "").utf8))
        func field(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
        guard field("client_id") == clientID else { return Self.error(400, "invalid_client", "Invalid client") }
        guard field("response_type") == "code", let redirectURI = field("redirect_uri") else {
            return Self.error(400, "invalid_request", "response_type code and redirect_uri are required")
        }
        state.counters.authorizeRequests += 1
        var parameters: [(String, String)]
        if state.behaviour.denyAuthorization {
            parameters = [("error", "access_denied")]
        } else {
            let code = Self.mint("code", &state.serial)
            state.codes[code] = (redirectURI, field("code_challenge_method") == "S256" ? field("code_challenge") : nil)
            parameters = [("code", code)]
        }
        if let given = field("state") { parameters.append(("state", given)) }
        let separator = redirectURI.contains("?") ? "&" : "?"
        let location = redirectURI + separator + FormURLEncoding.encode(parameters)
        return MockResponse(status: 302, headers: [("Location", location)])
    }

    /// HTTP Basic `client_id:client_secret`; without it (PKCE), `client_id` in
    /// the body, accepted for the user grants only.
    private func authenticate(_ request: MockRequest, body clientIDInBody: String?, grantType: String?, _ behaviour: Behaviour) -> MockResponse? {
        let status = behaviour.invalidClientStatus
        if let authorization = request.header("Authorization") {
            guard authorization.lowercased().hasPrefix("basic "),
                  let decoded = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
                  let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":") else {
                return Self.error(status, "invalid_client", "Invalid client")
            }
            guard text[..<colon] == clientID else { return Self.error(status, "invalid_client", "Invalid client") }
            guard text[text.index(after: colon)...] == clientSecret else { return Self.error(status, "invalid_client", "Invalid client secret") }
            return nil
        }
        guard grantType == "refresh_token" || grantType == "authorization_code" else {
            return Self.error(status, "invalid_client", "Invalid client")
        }
        guard clientIDInBody == clientID else { return Self.error(status, "invalid_client", "Invalid client") }
        return nil
    }

    private func grant(_ state: inout State, refreshToken: String?) -> MockResponse {
        let access = Self.mint("at", &state.serial)
        state.accessTokens[access] = Date().addingTimeInterval(TimeInterval(state.behaviour.expiresIn))
        state.counters.lastIssuedAccessToken = access
        state.counters.issuedAccessTokens.append(access)
        var body: [String: any Sendable] = [
            "access_token": access, "token_type": state.behaviour.tokenType, "expires_in": state.behaviour.expiresIn,
        ]
        if let refreshToken {
            body["refresh_token"] = refreshToken
            body["scope"] = "user-read-private user-read-email"
            state.counters.lastIssuedRefreshToken = refreshToken
        }
        return .json(200, body)
    }

    static func error(_ status: Int, _ code: String, _ description: String) -> MockResponse {
        .json(status, ["error": code, "error_description": description])
    }

    private static func mint(_ kind: String, _ serial: inout Int) -> String {
        serial += 1
        let random = (0..<12).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()
        return "mock-\(kind)-\(serial)-\(random)"
    }

    /// PKCE S256: base64url (unpadded) of the verifier's SHA-256.
    public static func pkceChallenge(verifier: String) -> String {
        Data(SHA256Digest.hash(Array(verifier.utf8))).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
