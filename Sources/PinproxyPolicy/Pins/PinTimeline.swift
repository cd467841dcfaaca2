import Foundation

/// Looks ahead over a horizon for the first moment a policy's active pins
/// drop below two (no backup) and to zero (outage), so a rotation is planned
/// weeks before it becomes a refusal (docs/contract.md §3: `check` warns, `--horizon`).
public enum PinTimeline {
    public struct Finding: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            /// Fewer than two active pins.
            case noBackup
            /// No active pin at all.
            case outage
        }

        public var kind: Kind
        /// The first instant it holds.
        public var at: Date
        /// The pin whose expiry causes it, if one does (nil when it holds already).
        public var expiringPin: Pin?
    }

    /// The first `noBackup` and the first `outage` moment in `[now, now + horizon]`,
    /// in time order; `noBackup` is left out when it starts with the outage.
    public static func findings(pins: [Pin], now: Date, horizon: Duration) -> [Finding] {
        let end = now.addingTimeInterval(horizon.timeInterval)
        // Counts change only at bounds: check now, each start, and just after each end.
        var moments: [(Date, Pin?)] = [(now, nil)]
        for pin in pins {
            if let start = pin.notBefore, start > now, start <= end { moments.append((start, nil)) }
            if let stop = pin.notAfter, stop >= now, stop < end { moments.append((stop.addingTimeInterval(0.001), pin)) }
        }
        moments.sort { $0.0 < $1.0 }
        var noBackup: Finding?
        var outage: Finding?
        for (moment, cause) in moments {
            let count = pins.filter { $0.isActive(at: moment) }.count
            if count == 0, outage == nil {
                outage = Finding(kind: .outage, at: moment, expiringPin: cause)
            }
            if count < 2, noBackup == nil {
                noBackup = Finding(kind: .noBackup, at: moment, expiringPin: cause)
            }
            if outage != nil { break }
        }
        var result: [Finding] = []
        if let noBackup, noBackup.at != outage?.at { result.append(noBackup) }
        if let outage { result.append(outage) }
        return result
    }

    /// How far ahead the pins cover without a gap.
    public enum Coverage: Sendable, Hashable {
        /// No pin is active at `now`.
        case none
        /// Some pin is active at every moment from `now` up to this instant, and none just after it.
        case until(Date)
        /// A pin without `not_after` is reached without a gap: coverage does not end.
        case unbounded
    }

    /// The end of pinned coverage from `now`: follows the active pins forward,
    /// each end handing over to whichever pins are active just after it (a
    /// pin starting within a millisecond of another's end counts as seamless,
    /// as `findings` counts it), until a moment with no active pin.
    public static func coverage(pins: [Pin], now: Date) -> Coverage {
        var moment = now
        var covered: Date?
        // Each step reaches a strictly later `not_after`, so it ends within pins.count + 1 steps.
        for _ in 0...pins.count {
            let active = pins.filter { $0.isActive(at: moment) }
            if active.isEmpty { break }
            if active.contains(where: { $0.notAfter == nil }) { return .unbounded }
            let end = active.compactMap(\.notAfter).max()!
            covered = end
            moment = end.addingTimeInterval(0.001)
        }
        return covered.map { .until($0) } ?? .none
    }
}
