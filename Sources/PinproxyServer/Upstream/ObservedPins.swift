import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxyTLS

/// The chains upstreams presented, and the pin verdicts per policy, for the
/// status page, `/policies` `observed` and `pins suggest` (docs/contract.md §13).
/// Written where the upstream handshake's pin check runs (`UpstreamConnector`),
/// for traffic and probes alike; bounded by `ObservedChains`.
public final class ObservedPins: Sendable {
    private struct State {
        var chains: ObservedChains
        /// Policy pattern → verdict label → count; traffic only, like `pin_validations_total`.
        var verdicts: [String: [String: Int]] = [:]
        /// Policy pattern → the latest refusals by the pins (time, code), oldest
        /// first, at most `maxRefusals`: what the status page calls failing now.
        var refusals: [String: [(at: Date, code: RefusalCode)]] = [:]
    }

    /// Enough to count the refusals of the last minutes of a busy host.
    static let maxRefusals = 1_000

    private let state: NIOLockedValueBox<State>

    public init(maxHosts: Int = 256, maxChainsPerHost: Int = 8) {
        state = NIOLockedValueBox(State(chains: ObservedChains(maxHosts: maxHosts, maxChainsPerHost: maxChainsPerHost)))
    }

    func record(host: String, policy: HostPolicy, chain: [Certificate], verdict: PinVerdict, countsTraffic: Bool, at now: Date) {
        let infos = chain.map {
            ObservedCertificateInfo(spkiSHA256: $0.spkiSHA256, subject: $0.subject, issuer: $0.issuer,
                                    notBefore: $0.notBefore, notAfter: $0.notAfter)
        }
        state.withLockedValue { state in
            state.chains.record(host: host, policy: policy.metricLabel, chain: infos, verdict: verdict.metricLabel, at: now)
            if countsTraffic { state.verdicts[policy.metricLabel, default: [:]][verdict.metricLabel, default: 0] += 1 }
            if countsTraffic, let code = verdict.refusalCode {
                var list = state.refusals[policy.metricLabel, default: []]
                list.append((now, code))
                if list.count > Self.maxRefusals { list.removeFirst(list.count - Self.maxRefusals) }
                state.refusals[policy.metricLabel] = list
            }
        }
    }

    /// Every host seen, sorted by name.
    public var hosts: [ObservedHost] { state.withLockedValue { $0.chains.all } }

    /// A policy's refusals by the pins since `since` (client traffic), oldest first.
    public func refusals(forPolicy pattern: String, since: Date) -> [(at: Date, code: RefusalCode)] {
        state.withLockedValue { ($0.refusals[pattern] ?? []).filter { $0.at >= since } }
    }

    /// A policy's verdict counts (`match`, `mismatch_reported`…) since start.
    public func verdicts(forPolicy pattern: String) -> [String: Int] {
        state.withLockedValue { $0.verdicts[pattern] ?? [:] }
    }
}
