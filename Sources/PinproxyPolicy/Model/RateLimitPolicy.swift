/// `rate_limit:` (docs/contract.md §3): at most `requestsPerSecond` on
/// average, `burst` at once, counted for the whole policy or for each client
/// (its identity, else its address); beyond it, 429 `rate_limited` locally.
public struct RateLimitPolicy: Sendable, Hashable {
    public enum Per: String, Sendable, Hashable, CaseIterable {
        case policy
        case client
    }

    public var requestsPerSecond: Double
    public var burst: Int
    public var per: Per

    public init(requestsPerSecond: Double, burst: Int, per: Per) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
        self.per = per
    }
}
