import NIOConcurrencyHelpers

/// Where the bearer tokens that `auth.spotify` attaches come from (the
/// Spotify sessions). The proxy knows tokens, not how they are obtained.
public protocol BearerTokenProvider: Sendable {
    /// A valid token for `session`, waiting at most the configured time;
    /// throws when none can be had (the request gets 503 `token_unavailable`).
    func token(session: String) async throws -> BearerToken
    /// The token `token(session:)` would return at once, without waiting or
    /// failing (a cached, valid one, or a static value); nil: ask
    /// `token(session:)`. The exchange asks this first, on its event loop.
    func tokenNow(session: String) -> BearerToken?
    /// The upstream answered 401 to a request sent with `generation`.
    func invalidate(session: String, generation: Int)
}

extension BearerTokenProvider {
    /// A provider that answers only asynchronously.
    public func tokenNow(session: String) -> BearerToken? { nil }
}

/// A token and the generation it belongs to. Its description never shows it.
public struct BearerToken: Sendable, CustomStringConvertible {
    private let value: String
    public let generation: Int

    public init(value: String, generation: Int) {
        self.value = value
        self.generation = generation
    }

    public func reveal() -> String { value }
    public var description: String { "BearerToken(generation: \(generation), <redacted>)" }
}

/// Set once the sessions exist (they send their token requests through the proxy's own path).
final class TokenProviderSlot: Sendable {
    private let box = NIOLockedValueBox<(any BearerTokenProvider)?>(nil)
    var provider: (any BearerTokenProvider)? { box.withLockedValue { $0 } }
    func set(_ provider: any BearerTokenProvider) { box.withLockedValue { $0 = provider } }
}
