import Foundation
import PinproxyPolicy
import PinproxyTLS

/// The upstream leg: handshakes, pins, negotiated TLS, certificates, probes.
extension PinproxyMetrics {
    /// One upstream connection attempt and how long connect + handshake took.
    public func upstreamHandshake(host: HostLabel, result: UpstreamHandshakeResult, duration: Duration) {
        counter(.upstreamHandshakes, host.value, result.rawValue).increment()
        histogram(.upstreamHandshakeDuration, buckets: Buckets.handshake, host.value).record(duration)
    }

    /// One pin evaluation of a verified chain.
    public func pinValidation(host: HostLabel, result: PinValidationResult) {
        counter(.pinValidations, host.value, result.rawValue).increment()
    }

    /// The same, straight from the evaluator's verdict.
    public func pinValidation(host: HostLabel, verdict: PinVerdict) {
        pinValidation(host: host, result: PinValidationResult(verdict))
    }

    /// The version and cipher a handshake with `host` negotiated. The series
    /// of the pair negotiated before is removed, so exactly one pair per host
    /// reads 1 and a downgrade shows as a new pair.
    public func upstreamTLS(host: HostLabel, version: String, cipher: String) {
        let pair = TLSPair(version: version, cipher: cipher)
        state.withLockedValue { state in
            // Under our lock, so two handshakes racing cannot leave two pairs at 1.
            if let previous = state.tls[host.value], previous != pair {
                removeGauge(.upstreamTLSInfo, [host.value, previous.version, previous.cipher])
            }
            state.tls[host.value] = pair
            gauge(.upstreamTLSInfo, host.value, version, cipher).set(to: 1)
        }
    }

    /// The same, from a completed handshake; also records the leaf's notAfter.
    public func upstreamTLS(host: HostLabel, handshake: TLSHandshakeInfo) {
        upstreamTLS(host: host, version: handshake.versionName, cipher: handshake.cipher)
        if let notAfter = handshake.leafNotAfter { upstreamCertExpiry(host: host, at: notAfter) }
    }

    /// The notAfter of the upstream leaf last seen for `host`.
    public func upstreamCertExpiry(host: HostLabel, at notAfter: Date) {
        gauge(.upstreamCertExpiry, host.value).set(to: Self.seconds(notAfter))
    }

    /// The result of the last active probe of `host`. Not created before the
    /// first probe: a 0 at start would fire the failing-probe alert.
    public func probe(host: HostLabel, success: Bool) {
        gauge(.probeSuccess, host.value).set(to: success ? 1 : 0)
    }

    /// The end of pinned coverage of `host` (see `PinSetExpiry`).
    public func pinExpiry(host: HostLabel, _ expiry: PinSetExpiry) {
        let value: Double
        switch expiry {
        case .noActivePin: value = 0
        case .at(let date): value = Self.seconds(date)
        case .never: value = .infinity
        }
        gauge(.pinExpiry, host.value).set(to: value)
    }

    /// One interception leaf minted (a cache miss).
    public func mintedCertificate() {
        counter(.mintedCertificates).increment()
    }
}

/// What `pin_expiry_timestamp_seconds` says about one policy's pins: the end
/// of pinned coverage, the last moment up to which some pin stays active
/// without a gap (what `check`'s timeline walks), not the latest `not_after`
/// among the pins active now: a staged rotation (A until T, B from T) covers
/// past T, and an alert on T alone would be a false alarm.
public enum PinSetExpiry: Sendable, Hashable {
    /// No pin is active now: exported as 0, so an expiry alert fires at once.
    case noActivePin
    /// Coverage ends at this instant.
    case at(Date)
    /// Coverage reaches a pin with no `not_after`: it never ends, exported
    /// as +Inf (an expiry alert never fires). Only a pin written without
    /// `not_after` can cause it.
    case never

    public init(_ pins: PinPolicy, now: Date) {
        switch PinTimeline.coverage(pins: pins.pins, now: now) {
        case .none: self = .noActivePin
        case .until(let end): self = .at(end)
        case .unbounded: self = .never
        }
    }
}
