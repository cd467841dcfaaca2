import PinproxyPolicy
import PinproxyTLS

// Label values of docs/contract.md §6, as closed types: a caller can only pass a value
// the contract names, so every series is bounded by configuration.

/// The `protocol` label of `requests_total`: the app's HTTP version
/// (docs/contract.md §11).
public enum RequestProtocol: String, Sendable, Hashable, CaseIterable {
    case http1
    case h2
}

/// The `host` label: a policy's `match` pattern as written, or `_none` for a
/// host no policy matched. Never a raw client-supplied name, so a client
/// cannot grow the series count by asking for random host names.
public struct HostLabel: Sendable, Hashable, CustomStringConvertible {
    public let value: String

    private init(value: String) { self.value = value }

    /// The label of the policy that decided, or `_none` when none matched.
    public init(_ policy: HostPolicy?) {
        self.value = policy?.metricLabel ?? HostLabel.unmatched.value
    }

    /// The label of a configured pattern (probes, `prepare`).
    public init(_ pattern: HostPattern) {
        self.value = pattern.text
    }

    /// A host no policy matched (`default_action` applied).
    public static let unmatched = HostLabel(value: "_none")

    public var description: String { value }
}

extension HostPolicy {
    /// This policy's `host` label.
    public var hostLabel: HostLabel { HostLabel(self) }
}

/// `pin_validations_total{result}` (docs/contract.md §3, pin evaluation steps 2–5).
public enum PinValidationResult: String, Sendable, Hashable, CaseIterable {
    case match
    case mismatchEnforced = "mismatch_enforced"
    case mismatchReported = "mismatch_reported"
    case noActivePins = "no_active_pins"
    case unpinned

    public init(_ verdict: PinVerdict) {
        switch verdict {
        case .match: self = .match
        case .mismatchEnforced: self = .mismatchEnforced
        case .mismatchReported: self = .mismatchReported
        case .noActivePins: self = .noActivePins
        case .unpinned: self = .unpinned
        }
    }
}

/// `bytes_total{direction}`: `up` is client → upstream, `down` the reverse.
/// `responses_cut_total{reason}`: why a response already under way was cut
/// (the access line's `error`, docs/contract.md §10).
public enum ResponseCutReason: String, Sendable, Hashable, CaseIterable {
    case upstreamClosed = "upstream_closed"
    case upstreamTimeout = "upstream_timeout"
    /// A refusal after the head had gone (any other failure).
    case other
}

/// `upstream_violations_total{kind}`: what an upstream sent that HTTP does
/// not allow and pinproxy did not pass on (docs/contract.md §6).
public enum UpstreamViolation: String, Sendable, Hashable, CaseIterable {
    /// A body with a 204, a 304 or an answer to HEAD: dropped, the stream closed.
    case bodyOnBodilessResponse = "body_on_bodiless_response"
}

public enum TrafficDirection: String, Sendable, Hashable, CaseIterable {
    case up
    case down
}

/// `token_refreshes_total{result}` (docs/contract.md §10).
public enum TokenRefreshResult: String, Sendable, Hashable, CaseIterable {
    case success
    case failure
    case rateLimited = "rate_limited"
    case invalidClient = "invalid_client"
    case invalidGrant = "invalid_grant"
}

/// `swap_requests_total{endpoint}` (docs/contract.md §7, token swap).
public enum SwapEndpoint: String, Sendable, Hashable, CaseIterable {
    case swap
    case refresh
}

/// `swap_requests_total{result}`. docs/contract.md §7 leaves the values open; these
/// follow the answers the swap backend can give.
public enum SwapResult: String, Sendable, Hashable, CaseIterable {
    /// Spotify answered 2xx and the answer was passed on.
    case success
    /// Spotify answered with an error status (passed on as is).
    case spotifyError = "spotify_error"
    /// The encrypted refresh token did not decrypt: 400, no call to accounts.
    case invalidRefreshToken = "invalid_refresh_token"
    /// The form lacked `code` / `refresh_token`.
    case badRequest = "bad_request"
    /// The accounts service could not be reached.
    case unavailable
    /// The client went over its rate limit on the swap listener: 429.
    case rateLimited = "rate_limited"
}

/// `client_handshakes_total{result}`: how an app's TLS handshake with an
/// interception certificate ended. `untrusted_ca` is the first-hour failure
/// of every intercepting proxy: the app does not trust pinproxy's CA yet.
public enum ClientHandshakeResult: String, Sendable, Hashable, CaseIterable {
    case ok
    case untrustedCA = "untrusted_ca"
    case tlsVersion = "tls_version"
    case tlsCipher = "tls_cipher"
    case tlsHandshake = "tls_handshake"
}

/// The `client` label (docs/contract.md §15): a name under
/// `clients.identities`, `_anonymous` for a client that sent no credential,
/// `_unknown` (failed logins only) for a name nobody configured. The server
/// passes only names it found in the configuration, never the user name a
/// client sent, so the series count is bounded by the configuration.
public struct ClientLabel: Sendable, Hashable, CustomStringConvertible {
    public let value: String

    /// A configured identity's name, or one of the reserved `_` values.
    public init(_ value: String) { self.value = value }

    public static let anonymous = ClientLabel(ClientPrincipal.metricLabelAnonymous)
    public static let unknown = ClientLabel("_unknown")

    public var description: String { value }
}
