import Foundation
import PinproxyPolicy
import PinproxySpotify

/// One Spotify session as the status page shows it: its name, flow and state,
/// never a secret (the status's reasons are error codes, as `/readyz` shows them).
public struct SessionSummary: Sendable, Equatable {
    public var name: String
    public var flow: String
    public var status: TokenSessionStatus

    public init(name: String, flow: String, status: TokenSessionStatus) {
        self.name = name
        self.flow = flow
        self.status = status
    }
}

/// Everything `GET /` shows (docs/contract.md §13), computed from the serving
/// snapshot and what the process has seen, at an injected instant. The HTML
/// is drawn from this alone (`StatusPageHTML`), so the page is tested without a server.
public struct StatusPageModel: Sendable {
    public struct Host: Sendable {
        public var pattern: String
        public var action: String
        public var file: String
        /// How a chain matching no pin is treated now (`enforce`, `report_mode`…); nil for tunnel and deny.
        public var enforcement: String?
        public var upstream: [String]
        public var tlsSummary: String
        /// Pin verdicts since start, by label, sorted.
        public var verdicts: [(label: String, count: Int)]
        public var leafNotAfter: Date?
        public var probe: ProbeStatus?
        public var timeline: PinTimelineModel?
        /// Host names seen upstream under this policy, and how many chains.
        public var observedHosts: [(host: String, chains: Int)]
        /// Client connections the pins refused within the failure window, if any.
        public var recentRefusals: RecentRefusals?
        /// Which credential the policy's requests carry, and in which header:
        /// names only, never a value (nil: the policy attaches none).
        public var credential: String?

        /// What the page leads with: refusals in the window, or a failed last probe.
        public var isFailing: Bool { recentRefusals != nil || probe?.success == false }
    }

    /// Refusals by the pins within the last `failureWindowMinutes`.
    public struct RecentRefusals: Sendable {
        public var count: Int
        public var last: Date
        /// The refusal codes seen (`pin_mismatch`, `pins_expired`), sorted.
        public var codes: [RefusalCode]
    }

    /// "Failing now" looks back this far: the `[10m]` of the shipped
    /// `PinproxyPinMismatchEnforced` alert, so page and alert agree.
    public static let failureWindowMinutes = 10

    public var now: Date
    public var refreshSeconds: Int
    public var timelineDays: Int
    public var hosts: [Host]
    public var defaultAction: String
    public var sessions: [SessionSummary]
    public var loadedAt: Date
    public var files: [String]
    public var warnings: [Diagnostic]
    public var lastReload: ReloadInfo?

    public init(snapshot: PolicySnapshot, lastReload: ReloadInfo?, now: Date, probe: (String) -> ProbeStatus?,
                verdicts: (String) -> [String: Int], observed: [ObservedHost], sessions: [SessionSummary],
                refusals: (String, Date) -> [(at: Date, code: RefusalCode)] = { _, _ in [] },
                refreshSeconds: Int = 30, timelineDays: Int = 90) {
        let windowStart = now.addingTimeInterval(-Double(Self.failureWindowMinutes) * 60)
        self.now = now
        self.refreshSeconds = refreshSeconds
        self.timelineDays = timelineDays
        self.defaultAction = snapshot.defaultAction.rawValue
        self.sessions = sessions.sorted { $0.name < $1.name }
        self.loadedAt = snapshot.loadedAt
        self.files = snapshot.files
        self.warnings = snapshot.warnings
        self.lastReload = lastReload
        hosts = snapshot.policies.map { policy in
            let spec = policy.spec
            let pattern = policy.metricLabel
            let probed = probe(pattern)
            return Host(
                pattern: pattern, action: spec.action.rawValue, file: spec.file,
                enforcement: spec.action == .intercept ? EnforcementDocument(spec.pins, now: now).inEffect.rawValue : nil,
                upstream: spec.upstream.map(\.description),
                tlsSummary: Self.tlsSummary(spec.tls),
                verdicts: verdicts(pattern).sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                leafNotAfter: Self.latestLeaf(probe: probed, observed: observed.filter { $0.policy == pattern }),
                probe: probed,
                timeline: spec.action == .intercept ? spec.pins.map { PinTimelineModel(pins: $0, now: now, days: timelineDays) } : nil,
                observedHosts: observed.filter { $0.policy == pattern }.map { ($0.host, $0.chains.count) },
                recentRefusals: Self.recent(refusals(pattern, windowStart)),
                credential: spec.auth.map(Self.credentialSummary))
        }
    }

    /// `github in Authorization (token {token})`, or for `by_client`:
    /// `billing: idp, reports: idp-reports; others: none in Authorization (Bearer {token})`.
    public static func credentialSummary(_ auth: AuthPolicy) -> String {
        let which: String
        switch auth.choice {
        case .named(let name):
            which = name
        case .byClient(let map, let fallback, let require):
            let others = fallback ?? (require ? "refused (client_denied)" : "none")
            which = map.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "; others: \(others)"
        }
        return "\(which) in \(auth.header) (\(auth.format))"
    }

    /// The leaf's notAfter from whichever saw the upstream last, the probe or
    /// traffic: after a rotation, traffic shows the new leaf before the next probe.
    public static func latestLeaf(probe: ProbeStatus?, observed: [ObservedHost]) -> Date? {
        let seen = observed.compactMap { host in host.chains.first.map { (at: $0.lastSeen, leaf: $0.certificates.first?.notAfter) } }
            .max { $0.at < $1.at }
        guard let probe, probe.leafNotAfter != nil else { return seen?.leaf }
        guard let seen, seen.at > probe.at else { return probe.leafNotAfter }
        return seen.leaf ?? probe.leafNotAfter
    }

    static func recent(_ refusals: [(at: Date, code: RefusalCode)]) -> RecentRefusals? {
        guard let last = refusals.map(\.at).max() else { return nil }
        return RecentRefusals(count: refusals.count, last: last, codes: Set(refusals.map(\.code)).sorted { $0.rawValue < $1.rawValue })
    }

    /// The hosts failing now, in policy order.
    public var failing: [Host] { hosts.filter(\.isFailing) }

    static func tlsSummary(_ tls: TLSPolicy) -> String {
        var parts = ["TLS \(tls.minimumVersion.rawValue)" + (tls.maximumVersion.map { "–\($0.rawValue)" } ?? "+")]
        if tls.caFile != nil { parts.append("own CA file") }
        if tls.clientCertificate != nil { parts.append("client certificate") }
        if tls.ciphers != nil || tls.ciphersuites != nil { parts.append("restricted ciphers") }
        return parts.joined(separator: ", ")
    }

    /// Whole days from now to a date (negative once past), for "expires in N days".
    public func daysLeft(_ date: Date) -> Int {
        Int((date.timeIntervalSince(now) / 86_400).rounded(.down))
    }
}
