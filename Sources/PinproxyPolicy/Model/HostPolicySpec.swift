import Foundation
import PinproxyTLS

/// One entry of a policy file's `hosts:` list, as written, defaults applied
/// (docs/contract.md §3). Pure data: `PolicyCompiler` turns it into a `HostPolicy` with
/// its TLS context built and its Spotify session resolved.
public struct HostPolicySpec: Sendable, Hashable {
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// Terminate the client's TLS with a minted leaf; talk to the upstream under this policy.
        case intercept
        /// Blind splice: no TLS of ours, no pins, no tokens.
        case tunnel
        /// 403 `host_denied`.
        case deny
    }

    /// `upstream_protocol`: what the upstream leg offers in ALPN.
    public enum UpstreamProtocol: String, Sendable, Hashable, CaseIterable {
        /// `h2, http/1.1`: the server chooses.
        case auto
        /// `http/1.1` only.
        case http1
        /// `h2` only: a server that does not select it fails the handshake's ALPN.
        case h2

        /// The ALPN list the upstream leg offers, most preferred first.
        public var alpn: [String] {
            switch self {
            case .auto: return ["h2", "http/1.1"]
            case .http1: return ["http/1.1"]
            case .h2: return ["h2"]
            }
        }
    }

    /// `websocket:`: whether an app may open a WebSocket (`Upgrade: websocket`)
    /// to this host (docs/contract.md §11).
    public enum WebSocket: String, Sendable, Hashable, CaseIterable {
        case allow
        /// 403 `upgrade_denied`.
        case deny
    }

    public var match: HostPattern
    public var action: Action
    /// Dial these instead of the host (tried in order on connect failure); empty: the host itself.
    public var upstream: [HostPort]
    /// Absolute-form `http://` requests go upstream over TLS.
    public var upgradeToTLS: Bool
    public var tls: TLSPolicy
    /// nil: no `pins:` at all, chain-only by intent (`unpinned`).
    public var pins: PinPolicy?
    public var auth: AuthPolicy?
    public var headers: HeaderRules
    public var connectTimeout: Duration
    public var handshakeTimeout: Duration
    public var responseTimeout: Duration
    /// Re-dials on refused / timeout / DNS failure, before any byte is sent.
    public var retries: Int
    public var maxUpstreamConnections: Int
    public var queueTimeout: Duration
    /// Active handshake probe interval; `.zero` disables it.
    public var probeInterval: Duration
    public var websocket: WebSocket = .allow
    /// `clients:`: the identities and networks that may use this policy;
    /// nil admits every client `clients.allow` lets in (docs/contract.md §15).
    public var clients: [ClientRule]? = nil
    /// `upstream_proxy:`: the parent proxy the upstream leg goes through.
    public var upstreamProxy: UpstreamProxy? = nil
    /// Which HTTP version the upstream leg offers in ALPN (docs/contract.md §11).
    public var upstreamProtocol: UpstreamProtocol = .auto
    /// `ports:`: the ports a client may ask for, in a CONNECT or an
    /// absolute-form URL alike; nil: the defaults (`allowedPorts(for:)`).
    public var ports: [Int]? = nil
    /// `rate_limit:`: requests answered 429 `rate_limited` beyond it; nil: no limit.
    public var rateLimit: RateLimitPolicy? = nil
    /// The policy file, absolute.
    public var file: String
    public var sourceMap: SourceMap

    /// Where the policy starts (its `match:` value).
    public var location: SourceLocation { sourceMap["match"] }
}

/// The upstream leg's TLS, from the policy alone (never from the client's hello).
public struct TLSPolicy: Sendable, Hashable {
    public var minimumVersion: TLSVersion
    public var allowLegacyTLS: Bool
    public var maximumVersion: TLSVersion?
    /// OpenSSL cipher string for TLS ≤ 1.2; nil keeps OpenSSL's default.
    public var ciphers: String?
    /// TLS 1.3 ciphersuites; nil keeps OpenSSL's default.
    public var ciphersuites: String?
    /// Custom trust store (PEM), absolute; nil: the system's.
    public var caFile: String?
    /// mTLS towards the upstream, absolute paths.
    public var clientCertificate: String?
    public var clientKey: String?

    public static let defaults = TLSPolicy(
        minimumVersion: .v1_2, allowLegacyTLS: false, maximumVersion: nil,
        ciphers: nil, ciphersuites: nil, caFile: nil, clientCertificate: nil, clientKey: nil)
}

/// `auth:`: which credential to inject, into which header, and when
/// (docs/contract.md §3 `auth`). `auth: {spotify: NAME}` is a spelling of
/// `auth: {credential: NAME}`.
public struct AuthPolicy: Sendable, Hashable {
    /// Which credential a request carries.
    public enum Choice: Sendable, Hashable {
        /// `credential:` (or `spotify:`): one credential for every client.
        case named(String)
        /// `by_client:`: by the client's identity; `fallback` for a client not
        /// mapped (nil: none); `require`: such a client is refused 403 `client_denied`.
        case byClient([String: String], fallback: String?, require: Bool)
    }

    /// What a client's request gets under this policy.
    public enum Resolution: Sendable, Hashable {
        case credential(String)
        /// No credential: the request goes without one.
        case none
        /// `require: true` and no credential for this client.
        case denied
    }

    public var choice: Choice
    /// The header the credential goes into (`Authorization` unless `header:` says otherwise).
    public var header: String
    /// The header's value, `{token}` replaced by the credential (`Bearer {token}` unless `format:` says otherwise).
    public var format: String
    /// Remove a client-sent value of `header`, so the proxy never forwards a mix.
    public var replaceClientAuth: Bool
    /// Attach also after a report-mode mismatch or with no active pins.
    public var attachUnpinned: Bool
    /// `throttle_queue`: while an upstream 429 window is open for a credential
    /// here, up to this many requests wait for it to pass (at most the
    /// policy's `queue_timeout`) instead of being refused; 0: none wait.
    public var throttleQueue: Int

    public init(choice: Choice, header: String = "Authorization", format: String = "Bearer {token}",
                replaceClientAuth: Bool = true, attachUnpinned: Bool = false, throttleQueue: Int = 0) {
        self.choice = choice
        self.header = header
        self.format = format
        self.replaceClientAuth = replaceClientAuth
        self.attachUnpinned = attachUnpinned
        self.throttleQueue = throttleQueue
    }

    /// `auth: {spotify: NAME}` as it always was.
    public init(spotifySession: String, replaceClientAuth: Bool, attachUnpinned: Bool) {
        self.init(choice: .named(spotifySession), replaceClientAuth: replaceClientAuth, attachUnpinned: attachUnpinned)
    }

    /// The one credential every client gets, or "" under `by_client` (kept for code that predates `credential:`).
    public var spotifySession: String {
        if case .named(let name) = choice { return name }
        return ""
    }

    /// The credential for a client with `identity` (nil: anonymous).
    public func resolve(identity: String?) -> Resolution {
        switch choice {
        case .named(let name):
            return .credential(name)
        case .byClient(let map, let fallback, let require):
            if let identity, let name = map[identity] { return .credential(name) }
            if let fallback { return .credential(fallback) }
            return require ? .denied : .none
        }
    }

    /// Every credential name the policy may inject, sorted.
    public var credentialNames: [String] {
        switch choice {
        case .named(let name): return [name]
        case .byClient(let map, let fallback, _): return Set(map.values).union(fallback.map { [$0] } ?? []).sorted()
        }
    }

    /// The header value for `token`.
    public func headerValue(token: String) -> String {
        Self.headerValue(format: format, token: token)
    }

    /// `format` with every `{token}` replaced by `token` (a `{token}` inside
    /// the token stays as it is), found by its bytes. Runs for every request
    /// that carries a token: Foundation's `replacingOccurrences`, which this
    /// was, bridged both strings to `NSString`, and the standard library's
    /// `firstRange(of:)` builds a search table (a dictionary) each call.
    public static func headerValue(format: String, token: String) -> String {
        let marker = Self.tokenMarker.utf8
        let bytes = format.utf8
        var value = ""
        value.reserveCapacity(bytes.count + token.utf8.count)
        var copied = bytes.startIndex
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: "{"), bytes[index...].starts(with: marker) {
                value += format[copied..<index]
                value += token
                index = bytes.index(index, offsetBy: marker.count)
                copied = index
            } else {
                bytes.formIndex(after: &index)
            }
        }
        value += format[copied...]
        return value
    }

    private static let tokenMarker = "{token}"
}

/// `headers:`: applied to every request inside an intercepted session.
public struct HeaderRules: Sendable, Hashable {
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String
    }

    /// In file order.
    public var set: [Field]
    public var remove: [String]

    public static let none = HeaderRules(set: [], remove: [])
}
