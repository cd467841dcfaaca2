import Foundation
import PinproxyPolicy

/// What the status page draws for one policy's pins over a window (docs/contract.md §13):
/// a bar per pin, the transition window, and the stretches with fewer than two
/// active pins (warning) or none (outage). Pure: all dates come in.
public struct PinTimelineModel: Sendable, Hashable {
    public struct Bar: Sendable, Hashable {
        public var pin: String
        public var note: String?
        /// Clipped to the window; `opensBefore`/`opensAfter` say the pin goes on beyond it.
        public var from: Date
        public var until: Date
        public var opensBefore: Bool
        public var opensAfter: Bool
        public var notAfter: Date?
        public var activeNow: Bool
    }

    public struct Stretch: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable { case warning, outage, transition }
        public var kind: Kind
        public var from: Date
        public var until: Date
    }

    public var start: Date
    public var end: Date
    public var bars: [Bar]
    /// The transition window, clipped to the window.
    public var transition: Stretch?
    public var stretches: [Stretch]
    /// `check`'s first look-ahead finding (PinTimeline), in words; nil when the pins cover the window with a backup.
    public var headline: String?

    public init(pins policy: PinPolicy, now: Date, days: Int = 90) {
        start = now
        end = now.addingTimeInterval(Double(days) * 86_400)
        let (start, end) = (self.start, self.end)
        bars = policy.pins.compactMap { pin in
            let from = max(pin.notBefore ?? start, start)
            let until = min(pin.notAfter ?? end, end)
            guard from <= until else { return nil }  // wholly outside the window: nothing to draw
            return Bar(pin: pin.hash, note: pin.note, from: from, until: until,
                       opensBefore: (pin.notBefore ?? .distantPast) < start, opensAfter: (pin.notAfter ?? .distantFuture) > end,
                       notAfter: pin.notAfter, activeNow: pin.isActive(at: now))
        }
        if let window = policy.transition, window.until >= start, window.from <= end {
            transition = Stretch(kind: .transition, from: max(window.from, start), until: min(window.until, end))
        }
        stretches = Self.stretches(pins: policy.pins, start: start, end: end)
        headline = PinTimeline.findings(pins: policy.pins, now: now, horizon: .seconds(end.timeIntervalSince(start))).first.map { finding in
            let when = DateText.format(finding.expiringPin?.notAfter ?? finding.at)
            switch finding.kind {
            case .noBackup: return "fewer than two active pins from \(when): no backup"
            case .outage: return "no active pin from \(when)"
            }
        }
    }

    /// The count of active pins changes only at a pin's bounds: cut the window
    /// there and judge each piece at its middle.
    static func stretches(pins: [Pin], start: Date, end: Date) -> [Stretch] {
        var cuts = Set([start, end])
        for pin in pins {
            for bound in [pin.notBefore, pin.notAfter].compactMap({ $0 }) where bound > start && bound < end { cuts.insert(bound) }
        }
        let sorted = cuts.sorted()
        var result: [Stretch] = []
        for (from, until) in zip(sorted, sorted.dropFirst()) {
            let middle = from.addingTimeInterval(until.timeIntervalSince(from) / 2)
            let count = pins.filter { $0.isActive(at: middle) }.count
            let kind: Stretch.Kind? = count == 0 ? .outage : count < 2 ? .warning : nil
            guard let kind else { continue }
            if let last = result.last, last.kind == kind, last.until == from {
                result[result.count - 1].until = until  // one stretch, not one per cut
            } else {
                result.append(Stretch(kind: kind, from: from, until: until))
            }
        }
        return result
    }
}
