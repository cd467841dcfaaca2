/// What the accounts service answered to one `POST /api/token`.
public struct TokenEndpointResponse: Sendable {
    public var status: Int
    /// In the order received; names compared case-insensitively by the reader.
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of `name` (case-insensitive), if any.
    func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }
}

/// The accounts service's token endpoint, as the proxy reaches it. The
/// session module never opens a socket: the proxy implements this over its
/// own pinned upstream path, so the token call obeys the accounts host's
/// policy like any other request (docs/contract.md §3 `spotify.accounts`).
public protocol TokenEndpoint: Sendable {
    /// POST {accounts}/api/token, `application/x-www-form-urlencoded`; Basic auth when given.
    /// Throws when no HTTP answer arrived (connect, TLS, timeout): a transient failure.
    func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse
}
