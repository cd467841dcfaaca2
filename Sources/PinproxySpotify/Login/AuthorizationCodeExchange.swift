import Foundation
import PinproxyPolicy

/// The end of `pinproxy credentials login` (and `spotify login`): the redirect's code (and the PKCE
/// verifier) exchanged at the token endpoint, the refresh token stored in the
/// session's `refresh_token_file` (raw value and a newline, 0600, atomic).
public struct AuthorizationCodeExchange: Sendable {
    let session: SpotifySession
    let endpoint: any TokenEndpoint
    /// With `spotify.store`, the refresh token goes there instead (docs/contract.md §12).
    let shared: (any SharedSessionStore)?

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case misconfigured(String)
        case unreachable(String)
        /// The accounts service refused: its status and `error` code.
        case refused(status: Int, error: String?)
        case noRefreshToken
        case store(String)

        public var description: String {
            switch self {
            case .misconfigured(let reason): return reason
            case .unreachable(let reason): return "no answer from the token endpoint through its host's policy: \(reason)"
            case .refused(let status, let error): return "the token endpoint refused the code: HTTP \(status)\(error.map { " \($0)" } ?? "")"
            case .noRefreshToken: return "the token endpoint answered without a refresh_token"
            case .store(let reason): return "cannot store the refresh token: \(reason)"
            }
        }
    }

    public init(session: SpotifySession, endpoint: any TokenEndpoint, shared: (any SharedSessionStore)? = nil) {
        self.session = session
        self.endpoint = endpoint
        self.shared = shared
    }

    /// Exchanges `code` and stores the refresh token. Returns where it went:
    /// the file's path, or "the session store".
    public func exchange(code: String, verifier: String) async throws(Failure) -> String {
        let path = session.refreshTokenFile
        guard shared != nil || path != nil else {
            throw .misconfigured("\(session.kindAndName) has no refresh_token_file")
        }
        guard let redirectURI = session.redirectURI else {
            throw .misconfigured("\(session.kindAndName) has no redirect_uri")
        }
        // The client authenticates as at every refresh (`client_auth`, or PKCE alone for a public client).
        let client: (basicAuth: (user: String, password: String)?, form: [(String, String)])
        switch SessionCredentials(config: session).clientAuthentication() {
        case .success(let value): client = value
        case .failure(.secret(let reason)), .failure(.noRefreshToken(let reason)): throw .misconfigured(reason)
        }
        let form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", verifier)]
            + client.form
        let basicAuth = client.basicAuth
        let response: TokenEndpointResponse
        do {
            response = try await endpoint.requestToken(form: form, basicAuth: basicAuth)
        } catch {
            throw .unreachable("\(error)")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            throw .refused(status: response.status, error: object?["error"] as? String)
        }
        guard let token = object?["refresh_token"] as? String, !token.isEmpty else { throw .noRefreshToken }
        if let shared {
            do {
                try await Self.store(Secret(token), session: session.name, in: shared)
            } catch {
                throw .store("\(error)")
            }
            return "the session store"
        }
        do {
            try RefreshTokenStore(path: path!).replace(with: Secret(token))
        } catch {
            throw .store("\(error)")
        }
        return path!
    }

    /// A new generation holding the new refresh token and no access token:
    /// every replica's next refresh uses it, and a refusal remembered for the
    /// old token no longer applies.
    static func store(_ token: Secret, session: String, in shared: any SharedSessionStore) async throws {
        let now = Date()
        try await shared.withLockedSession(session: session) { row -> (write: StoredSession?, result: Void) in
            var next = row
            next.generation = row.generation + 1
            next.accessToken = nil
            next.accessObtainedAt = nil
            next.accessExpiresAt = nil
            next.refreshToken = token
            next.refreshTokenIssuedAt = now
            next.staleGeneration = 0
            return (next, ())
        }
    }
}
