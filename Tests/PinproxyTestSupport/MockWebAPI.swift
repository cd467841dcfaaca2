import Foundation
import NIOConcurrencyHelpers

/// The Spotify Web API, locally, over HTTPS: any method under `/v1/`
/// requires `Authorization: Bearer <a token MockAccounts issued and still
/// valid>`, else 401 `{"error": {"status": 401, "message": …}}` (docs/contract.md §7).
/// Success echoes the request as JSON. Every Authorization header seen is
/// recorded, so a test can show a client-sent `Bearer evil` never arrived.
public final class MockWebAPI: Sendable {
    public struct Behaviour: Sendable {
        /// The next N requests get 401 even with a valid token (token revoked early).
        public var unauthorizedNext = 0
        /// Every request gets 403 (a scope the token lacks): must never trigger a refresh.
        public var forbidden = false
        /// The next N requests get 429 with `Retry-After: retryAfter`.
        public var rateLimitNext = 0
        public var retryAfter = 1
    }

    public struct Seen: Sendable {
        public var method: String
        public var path: String
        /// Nil when the request had none.
        public var authorization: String?
        public var bodyBytes: Int
        public var status: Int
    }

    private struct State {
        var behaviour = Behaviour()
        var seen: [Seen] = []
    }

    public let accounts: MockAccounts
    private let state = NIOLockedValueBox(State())
    private let serverBox = NIOLockedValueBox<MockHTTPSServer?>(nil)
    public var server: MockHTTPSServer { serverBox.withLockedValue { $0! } }
    public var port: Int { server.port }
    public var baseURL: String { server.baseURL }

    public init(chainFile: String, keyFile: String, accounts: MockAccounts) async throws {
        self.accounts = accounts
        let server = try await MockHTTPSServer(chainFile: chainFile, keyFile: keyFile,
                                               handler: { [weak self] request in self?.handle(request) ?? .close })
        serverBox.withLockedValue { $0 = server }
    }

    public func stop() { server.stop() }

    public func update(_ change: (inout Behaviour) -> Void) { state.withLockedValue { change(&$0.behaviour) } }
    /// Every request, in order of arrival.
    public var seen: [Seen] { state.withLockedValue { $0.seen } }
    public var authorizationHeaders: [String?] { seen.map(\.authorization) }

    private func handle(_ request: MockRequest) -> MockAction {
        let authorization = request.header("Authorization")
        let bearer = authorization.flatMap { value -> String? in
            value.lowercased().hasPrefix("bearer ") ? String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
        }
        let tokenValid = bearer.map(accounts.isValidAccessToken) ?? false
        return state.withLockedValue { state -> MockAction in
            let response: MockResponse
            if !request.path.hasPrefix("/v1/") {
                response = Self.error(404, "Service not found")
            } else if state.behaviour.rateLimitNext > 0 {
                state.behaviour.rateLimitNext -= 1
                response = Self.error(429, "API rate limit exceeded", headers: [("Retry-After", String(state.behaviour.retryAfter))])
            } else if state.behaviour.unauthorizedNext > 0 {
                state.behaviour.unauthorizedNext -= 1
                response = Self.error(401, "The access token expired")
            } else if bearer == nil {
                response = Self.error(401, authorization == nil ? "No token provided" : "Only valid bearer authentication supported")
            } else if !tokenValid {
                response = Self.error(401, "Invalid access token")
            } else if state.behaviour.forbidden {
                response = Self.error(403, "Insufficient client scope")
            } else {
                response = .json(200, ["method": request.method, "path": request.path, "query": request.query ?? "",
                                       "body_bytes": request.body.count, "id": "mock-user"])
            }
            state.seen.append(Seen(method: request.method, path: request.path, authorization: authorization,
                                   bodyBytes: request.body.count, status: response.status))
            return .respond(response)
        }
    }

    static func error(_ status: Int, _ message: String, headers: [(String, String)] = []) -> MockResponse {
        .json(status, ["error": ["status": status, "message": message] as [String: any Sendable]], headers: headers)
    }
}
