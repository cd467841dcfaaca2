import Foundation

/// `clients.identities.NAME` (docs/contract.md §15): an app that authenticates
/// with `Proxy-Authorization: Basic NAME:PASSWORD`.
public struct ClientIdentity: Sendable, Hashable {
    public var name: String
    public var passwordHash: PasswordHash
    /// Where this identity may connect from; empty: anywhere `clients.allow` lets in.
    public var from: [CIDR]
    public var location: SourceLocation

    public init(name: String, passwordHash: PasswordHash, from: [CIDR], location: SourceLocation) {
        self.name = name
        self.passwordHash = passwordHash
        self.from = from
        self.location = location
    }

    /// Whether a client at `address` may use this identity.
    public func admitsAddress(_ address: [UInt8]?) -> Bool {
        guard !from.isEmpty else { return true }
        guard let address else { return false }
        return from.contains { $0.contains(bytes: address) }
    }
}

/// One entry of a host policy's `clients:` list: an identity name or a CIDR.
public struct ClientRule: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case identity(String)
        case network(CIDR)
    }

    public var kind: Kind
    public var location: SourceLocation

    public init(_ kind: Kind, location: SourceLocation) {
        self.kind = kind
        self.location = location
    }

    /// An entry that parses as a CIDR (or a bare address) is a network; any
    /// other text names an identity, checked against `clients.identities` by
    /// the validator.
    public static func parse(_ text: String, location: SourceLocation) -> ClientRule {
        if let cidr = try? CIDR(parsing: text) { return ClientRule(.network(cidr), location: location) }
        if let bytes = IPAddress.parse(text), let cidr = try? CIDR(parsing: "\(text)/\(bytes.count * 8)") {
            return ClientRule(.network(cidr), location: location)
        }
        return ClientRule(.identity(text), location: location)
    }

    public var description: String {
        switch kind {
        case .identity(let name): return name
        case .network(let cidr): return cidr.description
        }
    }
}

/// `upstream_proxy:` of a host policy (docs/contract.md §15): the parent proxy
/// the upstream leg is tunnelled through with CONNECT.
public struct UpstreamProxy: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// `user:password` for `Proxy-Authorization: Basic` to the parent.
    public var credentials: Secret?

    public init(host: String, port: Int, credentials: Secret?) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// `http://host:port`, never the credentials (logs, pool keys, errors).
    public var description: String {
        "http://\(HostPort.bracketed(host)):\(port)"
    }

    /// Parses `http://[user:password@]host:port`. The error says what is wrong.
    public init(parsing text: String) throws(UpstreamProxyError) {
        guard text.hasPrefix("http://") else {
            throw UpstreamProxyError("must be `http://HOST:PORT` (a parent proxy spoken to in plain HTTP, then CONNECT)")
        }
        var rest = Substring(text.dropFirst("http://".count))
        if rest.hasSuffix("/") { rest.removeLast() }
        var credentials: Secret?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            guard userInfo.contains(":") else { throw UpstreamProxyError("has credentials without `:`; write `http://USER:PASSWORD@HOST:PORT`") }
            credentials = Secret(Self.percentDecoded(String(userInfo)))
            rest = rest[rest.index(after: at)...]
        }
        guard !rest.contains("/"), let hostPort = HostPort(parsing: String(rest)) else {
            throw UpstreamProxyError("must be `http://HOST:PORT` with nothing after the port")
        }
        self.init(host: hostPort.host, port: hostPort.port, credentials: credentials)
    }

    /// `%40` in a password is `@`, as in any proxy URL.
    private static func percentDecoded(_ text: String) -> String {
        text.removingPercentEncoding ?? text
    }
}

public struct UpstreamProxyError: Error, Sendable, Hashable {
    public var message: String
    init(_ message: String) { self.message = message }
}
