import Foundation

/// Dates and date-times as pin and window bounds are written (docs/contract.md §10).
/// A date alone names a whole day in UTC: its first instant when it opens a
/// range (`not_before`, `from`) and its last when it closes one (`not_after`,
/// `until`), so `not_after: 2027-03-01` keeps a pin valid all that day.
public enum DateText {
    public enum Bound: Sendable {
        case start
        case end
    }

    /// The last instant of a day: one millisecond before the next midnight.
    /// Ranges are inclusive at both ends, so this still belongs to the day.
    static let endOfDayOffset: TimeInterval = 86400 - 0.001

    /// Parses `2026-08-20` or an RFC 3339 date-time (`2026-08-20T12:00:00Z`,
    /// `…+02:00`, fractional seconds, `T` or a space; UTC when no zone is given).
    public static func parse(_ text: String, bound: Bound) -> Date? {
        let t = text.trimmingCharacters(in: .whitespaces)
        let scalars = Array(t.unicodeScalars)
        guard scalars.count >= 10, let day = parseDay(scalars[0..<10]) else { return nil }
        let midnight = TimeInterval(day) * 86400
        if scalars.count == 10 {
            return Date(timeIntervalSince1970: bound == .start ? midnight : midnight + endOfDayOffset)
        }
        guard "Tt ".unicodeScalars.contains(scalars[10]),
              let (secondsOfDay, offset) = parseTime(scalars[11...]) else { return nil }
        return Date(timeIntervalSince1970: midnight + secondsOfDay - offset)
    }

    /// RFC 3339 in UTC, to the second (`2026-08-20T23:59:59Z`): how diagnostics
    /// and the admin API name instants.
    public static func format(_ date: Date) -> String {
        let total = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let seconds = total - days * 86400
        let (y, m, d) = civil(fromDays: days)
        return String(format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                      y, m, d, seconds / 3600, seconds % 3600 / 60, seconds % 60)
    }

    /// `2026-08-20`, the day of `date` in UTC.
    public static func formatDay(_ date: Date) -> String {
        String(format(date).prefix(10))
    }

    static let expectation = "a date (2026-08-20) or an RFC 3339 date-time (2026-08-20T12:00:00Z)"

    // MARK: Pieces

    private static func number(_ s: ArraySlice<Unicode.Scalar>) -> Int? {
        guard !s.isEmpty, s.allSatisfy({ ("0"..."9").contains($0) }) else { return nil }
        return Int(String(String.UnicodeScalarView(s)))
    }

    /// Days since 1970-01-01 for `YYYY-MM-DD`, with month and day checked.
    private static func parseDay(_ s: ArraySlice<Unicode.Scalar>) -> Int64? {
        let b = s.startIndex
        guard s[b + 4] == "-", s[b + 7] == "-",
              let y = number(s[b..<b + 4]), let m = number(s[b + 5..<b + 7]), let d = number(s[b + 8..<b + 10]),
              (1...12).contains(m), d >= 1, d <= daysInMonth(y, m) else { return nil }
        return days(fromCivil: Int64(y), Int64(m), Int64(d))
    }

    /// `HH:MM:SS[.fff][Z|±HH:MM]` → (seconds of the day, zone offset in seconds).
    private static func parseTime(_ s: ArraySlice<Unicode.Scalar>) -> (TimeInterval, TimeInterval)? {
        var rest = s
        guard rest.count >= 8 else { return nil }
        let b = rest.startIndex
        guard rest[b + 2] == ":", rest[b + 5] == ":",
              let h = number(rest[b..<b + 2]), let mi = number(rest[b + 3..<b + 5]), let se = number(rest[b + 6..<b + 8]),
              h < 24, mi < 60, se < 61 else { return nil }
        var seconds = TimeInterval(h * 3600 + mi * 60 + se)
        rest = rest[(b + 8)...]
        if rest.first == "." {
            let digits = rest.dropFirst().prefix { ("0"..."9").contains($0) }
            guard !digits.isEmpty, let fraction = Double("0." + String(String.UnicodeScalarView(digits))) else { return nil }
            seconds += fraction
            rest = rest[digits.endIndex...]
        }
        switch rest.first {
        case nil:
            return (seconds, 0)
        case "Z", "z":
            return rest.count == 1 ? (seconds, 0) : nil
        case "+", "-":
            let sign: TimeInterval = rest.first == "+" ? 1 : -1
            let z = rest.dropFirst()
            guard z.count == 5, z[z.startIndex + 2] == ":",
                  let zh = number(z.prefix(2)), let zm = number(z.suffix(2)), zh < 24, zm < 60 else { return nil }
            return (seconds, sign * TimeInterval(zh * 3600 + zm * 60))
        default:
            return nil
        }
    }

    private static func daysInMonth(_ y: Int, _ m: Int) -> Int {
        switch m {
        case 2: return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's civil-date algorithms: exact, no calendar objects.
    private static func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    private static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }
}
