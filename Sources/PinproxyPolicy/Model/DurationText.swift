import Foundation

/// Durations as the files write them: `250ms`, `10s`, `5m`, `1h`, `30d`, or a
/// bare `0` (meaning "disabled" where a key allows it, e.g. `probe_interval`).
/// One unit per value: `90m` rather than `1h30m`, which reads the same to
/// everyone.
public enum DurationText {
    public static func parse(_ text: String) -> Duration? {
        let t = text.trimmingCharacters(in: .whitespaces)
        if t == "0" { return .zero }
        let units: [(suffix: String, seconds: Int64)] = [
            ("ms", 0), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400),
        ]
        for (suffix, seconds) in units where t.hasSuffix(suffix) {
            let number = t.dropLast(suffix.count)
            // "5ms" also ends in "s": only a digit-only remainder counts.
            guard !number.isEmpty, number.allSatisfy(\.isASCIIDigitChar), let value = Int64(number) else { continue }
            return seconds == 0 ? .milliseconds(value) : .seconds(value * seconds)
        }
        return nil
    }

    /// The shortest exact rendering (`90s` stays `90s`, `3600s` becomes `1h`).
    public static func format(_ duration: Duration) -> String {
        let ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if ms == 0 { return "0" }
        if ms % 1000 != 0 { return "\(ms)ms" }
        let s = ms / 1000
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where s % size == 0 {
            return "\(s / size)\(unit)"
        }
        return "\(s)s"
    }

    static let expectation = "a duration such as 250ms, 10s, 5m, 1h or 30d"
}

extension Duration {
    /// Seconds as a `Double`, for APIs that take `TimeInterval`.
    public var timeInterval: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension Character {
    var isASCIIDigitChar: Bool { ("0"..."9").contains(self) }
}

