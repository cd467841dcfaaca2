import PinproxyTLS

/// A host policy ready to serve: the spec as written, its upstream TLS
/// context built once (contexts are expensive and shareable; docs/contract.md §3), the
/// Spotify session it names resolved, and a digest that changes exactly when
/// the policy does (pooled connections opened under another digest are retired).
///
/// Fields of the spec read through directly: `policy.action`, `policy.pins`.
/// A class: requests pass it around (exchange, dial plan, pool key), and a
/// copy of the struct retained every field of the spec each time.
@dynamicMemberLookup
public final class HostPolicy: Sendable {
    public let spec: HostPolicySpec
    /// The upstream leg's client context (min/max version, ciphers, trust, mTLS).
    public let tlsContext: TLSContext
    /// The session `auth.spotify` names; nil without `auth`.
    public let spotifySession: SpotifySession?
    /// SHA-256 hex of the policy's canonical rendering (`/policies`, pool retirement).
    public let digest: String

    public init(spec: HostPolicySpec, tlsContext: TLSContext, spotifySession: SpotifySession?) {
        self.spec = spec
        self.tlsContext = tlsContext
        self.spotifySession = spotifySession
        self.digest = PolicyDigest.digest(of: spec)
    }

    public subscript<T>(dynamicMember keyPath: KeyPath<HostPolicySpec, T>) -> T {
        spec[keyPath: keyPath]
    }

    /// The `host` metric label: the pattern as written (docs/contract.md §6).
    public var metricLabel: String { spec.match.text }
}
