import Foundation

/// Everything one load produced, compiled and immutable. A connection takes
/// the current snapshot once and uses it to the end, so a reload never
/// changes the rules under a request in flight (docs/contract.md §3: new connections
/// get the new policy).
public final class PolicySnapshot: Sendable {
    public let config: PinproxyConfig
    /// In load order: policy files by name, entries in file order.
    public let policies: [HostPolicy]
    /// Warnings of the load that produced this snapshot (timeline, windows…).
    public let warnings: [Diagnostic]
    /// The files read: the main file (if any) and every policy file.
    public let files: [String]
    public let loadedAt: Date
    private let matcher: HostMatcher<Int>

    public init(config: PinproxyConfig, policies: [HostPolicy], warnings: [Diagnostic], files: [String], loadedAt: Date) {
        self.config = config
        self.policies = policies
        self.warnings = warnings
        self.files = files
        self.loadedAt = loadedAt
        self.matcher = HostMatcher(policies.enumerated().map { ($0.element.spec.match, $0.offset) })
    }

    /// The most specific policy for `host` (docs/contract.md §10), or nil: then `defaultAction` applies.
    public func policy(forHost host: String) -> HostPolicy? {
        matcher.match(host).map { policies[$0] }
    }

    /// For hosts no policy matches.
    public var defaultAction: PinproxyConfig.DefaultAction { config.defaultAction }

    /// The policy with this exact `match` pattern (admin API, probes).
    public func policy(forPattern pattern: String) -> HostPolicy? {
        let key = (try? HostPattern(parsing: pattern))?.key
        return policies.first { $0.spec.match.key == key }
    }
}
