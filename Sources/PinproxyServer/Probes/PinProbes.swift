import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyPolicy
import ServiceLifecycle

/// What the last active probe of a host policy found.
public struct ProbeResult: Sendable {
    /// The handshake passed the policy: a request would have been served.
    /// A mismatch let through by report mode or a transition window is a
    /// success here; `verdict` says it was one.
    public var success: Bool
    public var at: Date
    public var leafNotAfter: Date?
    /// The pin verdict (`pin_validations_total`'s result label), when the
    /// handshake got as far as the pins.
    public var verdict: String?
    /// The refusal code when it failed.
    public var error: String?
    /// Why it failed (the refusal, with the observed pins for a pin failure),
    /// or the observed pins of a reported mismatch.
    public var detail: String?
}

/// Active pin probes (docs/contract.md §3 `probe_interval`): per intercepted host, a
/// TLS handshake with the host's policy — no request — evaluated like real
/// traffic, so a rotated certificate or pin shows before users hit it. The
/// first probe runs right after start, then one every interval; `0` disables.
/// Probes feed `probe_success`, the leaf's expiry and the TLS info. Of the
/// traffic counters, which stay about users, they feed only the pin
/// mismatches (`pin_validations_total{result="mismatch_reported"|"mismatch_enforced"}`):
/// a mismatch is news about the upstream whoever saw it, and with no traffic
/// the probe is the only one to see it.
public final class PinProbes: Service, Sendable {
    private let services: ProxyServices
    private let results = NIOLockedValueBox<[String: ProbeResult]>([:])
    private let schedule = NIOLockedValueBox<[String: (digest: String, due: Date, running: Bool)]>([:])
    private let tick: Duration

    init(services: ProxyServices, tick: Duration = .milliseconds(250)) {
        self.services = services
        self.tick = tick
    }

    /// The last result for a policy pattern, if it has been probed.
    public func result(for pattern: String) -> ProbeResult? {
        results.withLockedValue { $0[pattern] }
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                startDueProbes(now: Date())
                try? await Task.sleep(for: tick)
            }
        } onGracefulShutdown: {}
    }

    func startDueProbes(now: Date) {
        let snapshot = services.store.snapshot
        var due: [HostPolicy] = []
        schedule.withLockedValue { schedule in
            var seen = Set<String>()
            for policy in snapshot.policies where policy.spec.action == .intercept {
                let pattern = policy.metricLabel
                let interval = TimeInterval(policy.spec.probeInterval.components.seconds)
                guard interval > 0, !pattern.contains("*") else { continue }  // disabled, or no name to dial
                seen.insert(pattern)
                var entry = schedule[pattern] ?? (policy.digest, now, false)
                if entry.digest != policy.digest { entry = (policy.digest, now, entry.running) }  // a changed policy: probe now
                if !entry.running && entry.due <= now {
                    entry.running = true
                    entry.due = now.addingTimeInterval(interval)
                    due.append(policy)
                }
                schedule[pattern] = entry
            }
            for gone in Set(schedule.keys).subtracting(seen) { schedule[gone] = nil }
        }
        for policy in due { _ = probe(policy) }
    }

    /// What `POST /probe?host=H` answers (docs/contract.md §5): one probe of
    /// the intercepted policy that matches `host`, now, outside the schedule;
    /// nil when no intercepted policy matches. A wildcard policy is probed
    /// with `host` as the name to dial; the result is the policy's last probe.
    public func probeNow(host: String) async -> ProbeResult? {
        let name = HostPattern.normalize(host)
        guard let policy = services.store.snapshot.policy(forHost: name), policy.spec.action == .intercept else { return nil }
        let dial = policy.metricLabel.contains("*") ? name : policy.metricLabel
        return try? await probe(policy, host: dial).get()
    }

    @discardableResult
    private func probe(_ policy: HostPolicy, host: String? = nil) -> EventLoopFuture<ProbeResult> {
        let pattern = policy.metricLabel
        let name = host ?? pattern
        let plan = DialPlan(host: name, port: 443, tls: true, policy: policy, countsTraffic: false)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let services = self.services
        let done = loop.makePromise(of: ProbeResult.self)
        services.connector.connect(plan, on: loop).whenComplete { result in
            let outcome: ProbeResult
            // A mismatch is counted whoever saw it; other verdicts stay about users.
            var mismatch: PinVerdict?
            switch result {
            case .success(let connection):
                let evaluation = connection.pinEvaluation
                var detail: String?
                if case .mismatchReported(let reason) = evaluation?.verdict {
                    mismatch = evaluation?.verdict
                    detail = "no active pin matches the verified chain (\(reason.rawValue)); observed (leaf to root): "
                        + (evaluation?.observedChain ?? "")
                }
                outcome = ProbeResult(success: true, at: Date(), leafNotAfter: connection.handshake?.leafNotAfter,
                                      verdict: evaluation?.verdict.metricLabel, error: nil, detail: detail)
                connection.close()
            case .failure(let error):
                let refusal = UpstreamConnector.refusal(for: error, host: name)
                if refusal.code == .pinMismatch { mismatch = .mismatchEnforced }
                outcome = ProbeResult(success: false, at: Date(), leafNotAfter: nil, verdict: PinVerdict(refusedWith: refusal.code)?.metricLabel,
                                      error: refusal.code.rawValue, detail: refusal.description)
                services.logger.error("pin probe failed", metadata: [
                    "host": "\(pattern)", "file": "\(policy.spec.file)", "error": "\(refusal.code.rawValue)", "detail": "\(refusal.detail)",
                ])
            }
            self.results.withLockedValue { $0[pattern] = outcome }
            self.schedule.withLockedValue { $0[pattern]?.running = false }
            services.instrumentation.probe(policy: policy, success: outcome.success)
            if let mismatch {
                services.instrumentation.pinValidation(policy: policy, verdict: mismatch)
            }
            done.succeed(outcome)
        }
        return done.futureResult
    }
}
