import Foundation

/// A `redirect_uri` that a login can listen on: plain HTTP on a loopback
/// address (RFC 8252 §7.3). The browser is on the same machine as
/// `pinproxy credentials login`, and the code it carries is worthless without
/// the PKCE verifier, so no TLS is needed; any other host could not be
/// listened on.
public struct LoopbackRedirect: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var path: String

    public init?(_ uri: String) {
        guard let components = URLComponents(string: uri), components.scheme == "http",
              let rawHost = components.host else { return nil }
        let host = rawHost.hasPrefix("[") ? String(rawHost.dropFirst().dropLast()) : rawHost
        guard ["127.0.0.1", "localhost", "::1"].contains(host) else { return nil }
        self.host = host == "localhost" ? "127.0.0.1" : host
        self.port = components.port ?? 80
        self.path = components.path.isEmpty ? "/" : components.path
    }
}
