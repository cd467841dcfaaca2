/// The codes the contract gives a refused request: the `X-Pinproxy-Error`
/// header, the JSON body's `error`, the access line's `error` and the
/// `reason` of `denied_total`. One enum in the lowest module that needs it;
/// its raw value is the text, used only where text leaves the process.
public enum RefusalCode: String, Sendable, Hashable, CaseIterable {
    case clientDenied = "client_denied"
    /// 407 (429 once an address has failed too often): docs/contract.md §15.
    case proxyAuthRequired = "proxy_auth_required"
    case hostDenied = "host_denied"
    /// A port outside the policy's `ports:` (docs/contract.md §3): 403.
    case portDenied = "port_denied"
    case ssrfBlocked = "ssrf_blocked"
    case pinMismatch = "pin_mismatch"
    case pinsExpired = "pins_expired"
    case verifyFailed = "verify_failed"
    case tlsVersion = "tls_version"
    case tlsCipher = "tls_cipher"
    case tlsHandshake = "tls_handshake"
    case connectFailed = "connect_failed"
    case upstreamTimeout = "upstream_timeout"
    case queueTimeout = "queue_timeout"
    case badRequest = "bad_request"
    case hostMismatch = "host_mismatch"
    case tokenUnavailable = "token_unavailable"
    /// A WebSocket upgrade to a host whose policy says `websocket: deny` (docs/contract.md §11).
    case upgradeDenied = "upgrade_denied"
    /// 429: the upstream answered 429 with `Retry-After` to this credential and host; the window is open (docs/contract.md §4).
    case upstreamThrottled = "upstream_throttled"
    /// 429: the policy's `rate_limit` is spent for now (docs/contract.md §4).
    case rateLimited = "rate_limited"
}

/// How one upstream connection attempt ended (`upstream_handshakes_total{result}`).
public enum UpstreamHandshakeResult: String, Sendable, Hashable, CaseIterable {
    case ok
    case pinMismatch = "pin_mismatch"
    case pinsExpired = "pins_expired"
    case verifyFailed = "verify_failed"
    case tlsVersion = "tls_version"
    case tlsCipher = "tls_cipher"
    case tlsHandshake = "tls_handshake"
    case connectFailed = "connect_failed"
    case timeout

    /// The result of an attempt refused with `code`. Every code is named:
    /// a new one cannot fall silently into `tls_handshake`.
    public init(refusal code: RefusalCode) {
        switch code {
        case .pinMismatch: self = .pinMismatch
        case .pinsExpired: self = .pinsExpired
        case .verifyFailed: self = .verifyFailed
        case .tlsVersion: self = .tlsVersion
        case .tlsCipher: self = .tlsCipher
        case .tlsHandshake: self = .tlsHandshake
        case .upstreamTimeout, .queueTimeout: self = .timeout
        case .ssrfBlocked, .connectFailed, .hostDenied, .portDenied, .clientDenied, .proxyAuthRequired: self = .connectFailed
        case .badRequest, .hostMismatch, .tokenUnavailable, .upgradeDenied, .upstreamThrottled, .rateLimited: self = .tlsHandshake
        }
    }
}

extension PinVerdict {
    /// The verdict behind a handshake refused with `code`, for the refusals
    /// that pins cause (nil for every other code).
    public init?(refusedWith code: RefusalCode) {
        switch code {
        case .pinMismatch: self = .mismatchEnforced
        case .pinsExpired: self = .noActivePins(.enforced)
        default: return nil
        }
    }
}
