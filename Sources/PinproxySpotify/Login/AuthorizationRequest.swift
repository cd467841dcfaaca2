import COpenSSL
import Foundation

/// One `pinproxy spotify login` attempt (DESIGN §7): the PKCE verifier and
/// its S256 challenge, the `state` that ties the redirect to this attempt,
/// and the authorize URL the user opens.
public struct AuthorizationRequest: Sendable {
    public let verifier: String
    public let challenge: String
    public let state: String

    public init() {
        self.init(verifier: Base64URL.encode(Self.random(32)), state: Base64URL.encode(Self.random(16)))
    }

    init(verifier: String, state: String) {
        self.verifier = verifier
        self.challenge = Self.s256(verifier)
        self.state = state
    }

    /// `{accounts}/authorize?response_type=code&client_id=…&redirect_uri=…&code_challenge_method=S256&code_challenge=…&state=…&scope=…`
    public func url(accounts: String, clientID: String, redirectURI: String, scope: String) -> String {
        let base = accounts.hasSuffix("/") ? String(accounts.dropLast()) : accounts
        let query: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("code_challenge_method", "S256"), ("code_challenge", challenge), ("state", state), ("scope", scope),
        ]
        return base + "/authorize?" + query.map { Self.escape($0.0) + "=" + Self.escape($0.1) }.joined(separator: "&")
    }

    /// PKCE S256 (RFC 7636 §4.2): base64url, unpadded, of SHA-256 of the verifier.
    static func s256(_ verifier: String) -> String {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        let bytes = Array(verifier.utf8)
        _ = SHA256(bytes, bytes.count, &digest)
        return Base64URL.encode(digest)
    }

    static func random(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }

    /// RFC 3986 unreserved characters stay; everything else is percent-encoded.
    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
