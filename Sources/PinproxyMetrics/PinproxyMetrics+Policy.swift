import Foundation
import PinproxyPolicy

/// The policy set: series prepared per configured host and session, reloads.
extension PinproxyMetrics {
    /// Creates at 0 the series of every configured host and session, so that
    /// rates and alerts see a 0 before the first event rather than nothing.
    ///
    /// Per host, by action: `intercept` gets the handshake and pin-validation
    /// counters for every result, both byte directions, the connection gauge
    /// and both histograms; `tunnel` gets bytes, connections and the request
    /// histogram; `deny` nothing (its refusals are in `denied_total`). Gauges
    /// whose 0 would mean "failed" or "expired" (probe, certificate and token
    /// expiry) are left out until their first real value. Idempotent; call it
    /// again after a reload (`observe(_:)` does).
    public func prepare(hosts: [HostPolicy], sessions: [String]) {
        for policy in hosts {
            let host = policy.metricLabel
            switch policy.action {
            case .intercept:
                for result in UpstreamHandshakeResult.allCases {
                    counter(.upstreamHandshakes, host, result.rawValue).increment(by: Int64(0))
                }
                for result in PinValidationResult.allCases {
                    counter(.pinValidations, host, result.rawValue).increment(by: Int64(0))
                }
                _ = histogram(.upstreamHandshakeDuration, buckets: Buckets.handshake, host)
                prepareTraffic(host)
            case .tunnel:
                prepareTraffic(host)
            case .deny:
                break
            }
        }
        for session in sessions {
            for result in TokenRefreshResult.allCases {
                counter(.tokenRefreshes, session, session, result.rawValue).increment(by: Int64(0))
            }
        }
    }

    private func prepareTraffic(_ host: String) {
        for direction in TrafficDirection.allCases {
            counter(.bytes, host, direction.rawValue).increment(by: Int64(0))
        }
        gauge(.upstreamConnections, host).increment(by: 0)
        gauge(.upstreamStreams, host).increment(by: 0)
        _ = histogram(.requestDuration, buckets: Buckets.request, host)
    }

    /// Prepares everything `snapshot` configures (hosts, sessions, `_none`
    /// when unmatched hosts are tunnelled), sets the pin expiry of every
    /// pinned policy as of `now`, records the snapshot's load time as the
    /// last successful load, and removes the host gauges of policies the
    /// snapshot no longer has.
    public func prepare(_ snapshot: PolicySnapshot, now: Date) {
        prepare(hosts: snapshot.policies, sessions: snapshot.config.tokenSessions.keys.sorted())
        if snapshot.defaultAction == .tunnel {
            prepareTraffic(HostLabel.unmatched.value)
        }
        updatePinExpiry(snapshot, now: now)
        gauge(.policyLastReloadSuccess).set(to: Self.seconds(snapshot.loadedAt))

        let current = Set(snapshot.policies.map(\.metricLabel))
        let (removed, removedTLS) = state.withLockedValue { state -> ([String], [(String, TLSPair)]) in
            let removed = state.hosts.subtracting(current).sorted()
            let removedTLS = state.tls.filter { !current.contains($0.key) }.map { ($0.key, $0.value) }
            for (host, _) in removedTLS { state.tls[host] = nil }
            state.hosts = current
            return (removed, removedTLS)
        }
        for host in removed {
            for family in [MetricFamily.pinExpiry, .upstreamCertExpiry, .probeSuccess] {
                removeGauge(family, [host])
            }
        }
        for (host, pair) in removedTLS {
            removeGauge(.upstreamTLSInfo, [host, pair.version, pair.cipher])
        }
    }

    /// Recomputes `pin_expiry_timestamp_seconds` for every pinned policy: pins
    /// become active and expire with time alone, so the admin server calls
    /// this before every scrape. A pin set that is empty by design (the
    /// learning phase: `mode: report` or `on_expiry: chain_only` with no pin
    /// listed) never refuses for want of a pin, so it exports no series at all:
    /// a 0 would fire `PinproxyPinSetExpiringSoon` for a host nobody broke.
    public func updatePinExpiry(_ snapshot: PolicySnapshot, now: Date) {
        for policy in snapshot.policies {
            guard let pins = policy.pins else { continue }
            if Self.isLearning(pins) {
                removeGauge(.pinExpiry, [policy.hostLabel.value])
                continue
            }
            pinExpiry(host: policy.hostLabel, PinSetExpiry(pins, now: now))
        }
    }

    /// No pin listed, and nothing refused for it (docs/contract.md §6).
    static func isLearning(_ pins: PinPolicy) -> Bool {
        pins.pins.isEmpty && (pins.mode == .report || pins.onExpiry == .chainOnly)
    }

    /// One reload attempt; on success also `policy_last_reload_success_timestamp_seconds`.
    public func policyReload(result: ReloadInfo.Result, at time: Date) {
        counter(.policyReloads, result.rawValue).increment()
        if result == .success {
            gauge(.policyLastReloadSuccess).set(to: Self.seconds(time))
        }
    }

    /// Prepares `store`'s serving snapshot and counts every later reload of
    /// it, preparing the new snapshot after each success. Observing the same
    /// store twice is a no-op, so the CLI and the admin server may both call it.
    public func observe(_ store: PolicyStore) {
        let first = state.withLockedValue { $0.observedStores.insert(ObjectIdentifier(store)).inserted }
        guard first else { return }
        prepare(store.snapshot, now: store.loader.clock())
        store.addObserver { [self] event in
            policyReload(result: event.info.result, at: event.info.at)
            if event.info.result == .success {
                prepare(event.current, now: event.info.at)
            }
        }
    }

    /// `build_info{version} 1`.
    public func buildInfo(version: String) {
        gauge(.buildInfo, version).set(to: 1)
    }
}
