import NIOCore
import PinproxyPolicy

/// How long a pool key waits before its next dial after dials failed in a
/// row (docs/contract.md §10, "Dial backoff"): 100 ms after the first
/// failure, doubling with each further one, at most 5 s; each delay is cut by
/// up to a fifth at random, so that keys failing together do not dial again
/// in step. A pure rule: the random source is injected, and the pool state
/// machine asks for a delay when it schedules its backoff timer.
struct DialBackoff: Sendable {
    var initial: TimeAmount = .milliseconds(100)
    var cap: TimeAmount = .seconds(5)
    /// A number in 0..<1; the delay is shortened by that share of a fifth.
    var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    /// The delay after `failures` (at least 1) dials failed in a row.
    func delay(afterFailures failures: Int) -> TimeAmount {
        // Doubled in whole steps until the cap: no overflow however long a host stays down.
        var step = initial
        for _ in 1..<max(failures, 1) where step < cap { step = step + step }
        let base = min(step, cap)
        let cut = Double(base.nanoseconds) / 5 * min(max(random(), 0), 1)
        return base - .nanoseconds(Int64(cut))
    }

    /// Whether a dial that failed with `code` puts its key into backoff: the
    /// upstream (or the path to it) failed. A policy decision (the SSRF guard,
    /// a denied host) says nothing about the upstream's health and is decided
    /// again at no cost to it, so it holds nothing back. Every code is named:
    /// a new one must be placed on one side.
    static func backsOff(after code: RefusalCode) -> Bool {
        switch code {
        case .connectFailed, .upstreamTimeout, .tlsHandshake, .tlsVersion, .tlsCipher, .verifyFailed, .pinMismatch, .pinsExpired:
            return true
        case .ssrfBlocked, .hostDenied, .portDenied, .clientDenied, .proxyAuthRequired, .badRequest, .hostMismatch,
             .tokenUnavailable, .upgradeDenied, .upstreamThrottled, .rateLimited, .queueTimeout:
            return false
        }
    }
}
