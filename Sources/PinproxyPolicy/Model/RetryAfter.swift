import Foundation

/// `Retry-After`: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
public enum RetryAfter {
    public static func parse(_ text: String, now: Date) -> Date? {
        let t = text.trimmingCharacters(in: .whitespaces)
        if !t.isEmpty, t.allSatisfy(\.isASCII), t.allSatisfy(\.isNumber) {
            guard let seconds = Int(t) else { return nil }
            return now.addingTimeInterval(TimeInterval(seconds))
        }
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: t) { return date }
        }
        return nil
    }

    /// IMF-fixdate, then the obsolete RFC 850 and asctime forms recipients must accept.
    private static let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]
}
