import PinproxyTLS

/// One `pinproxy credentials login` (or `spotify login`) attempt (authorization code with PKCE,
/// RFC 7636): the verifier and its S256 challenge, the `state` that ties the
/// browser's redirect to this attempt and no other, and the authorize URL
/// the user opens.
public struct AuthorizationRequest: Sendable {
    public let verifier: String
    public let challenge: String
    public let state: String

    /// 32 random bytes make a 43-character verifier, the shortest RFC 7636
    /// allows; 16 make a `state` no one can guess.
    public init() {
        self.init(verifier: Base64URL.encode(SecureRandom.bytes(32)), state: Base64URL.encode(SecureRandom.bytes(16)))
    }

    init(verifier: String, state: String) {
        self.verifier = verifier
        self.challenge = Self.s256(verifier)
        self.state = state
    }

    /// Spotify's: `{accounts}/authorize?response_type=code&client_id=…&redirect_uri=…&code_challenge_method=S256&code_challenge=…&state=…&scope=…`
    public func url(accounts: String, clientID: String, redirectURI: String, scope: String) -> String {
        let base = accounts.hasSuffix("/") ? String(accounts.dropLast()) : accounts
        return url(authorize: base + "/authorize", clientID: clientID, redirectURI: redirectURI, scope: scope)
    }

    /// Any provider's: its `authorize_url` with the same parameters (RFC 6749
    /// §4.1.1, RFC 7636 §4.3), `scope` only when there is one. A query the
    /// operator wrote into `authorize_url` (an `audience`, a `prompt`) is kept.
    public func url(authorize: String, clientID: String, redirectURI: String, scope: String?) -> String {
        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("code_challenge_method", "S256"), ("code_challenge", challenge), ("state", state),
        ]
        if let scope, !scope.isEmpty { query.append(("scope", scope)) }
        return authorize + (authorize.contains("?") ? "&" : "?") + FormEncoding.encode(query, space: .percent20)
    }

    /// PKCE S256 (RFC 7636 §4.2): base64url, unpadded, of SHA-256 of the verifier.
    static func s256(_ verifier: String) -> String {
        Base64URL.encode(SHA256Digest.hash(Array(verifier.utf8)))
    }
}
