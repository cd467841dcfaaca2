import PinproxyTLS

/// `Proxy-Authorization: Basic BASE64(NAME:PASSWORD)` (RFC 7617), as curl,
/// Python, Java, Go and Node send it for `http://NAME:PASSWORD@proxy:port`.
/// `description` never shows the password.
public struct ProxyCredential: Sendable, Hashable, CustomStringConvertible {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// The credential in a header value, or nil when it is not Basic, not
    /// base64, not UTF-8 or has no `:`.
    public init?(headerValue: String) {
        let trimmed = headerValue.drop { $0 == " " }
        guard let space = trimmed.firstIndex(of: " "),
              trimmed[..<space].lowercased() == "basic" else { return nil }
        let encoded = String(trimmed[trimmed.index(after: space)...].drop { $0 == " " }.prefix { $0 != " " })
        guard let bytes = Base64.decode(encoded), let text = String(validating: bytes, as: UTF8.self),
              let colon = text.firstIndex(of: ":") else { return nil }
        self.user = String(text[..<colon])
        self.password = String(text[text.index(after: colon)...])
    }

    /// The header value for this credential (the parent proxy's, tests).
    public var headerValue: String {
        "Basic " + Base64.encode(Array("\(user):\(password)".utf8))
    }

    public var description: String { "ProxyCredential(user: <redacted>)" }
}
