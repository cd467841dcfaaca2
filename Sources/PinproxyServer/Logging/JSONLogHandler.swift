import Foundation
import Logging
import NIOCore
import NIOPosix
import PinproxyPolicy

/// One JSON object per line on standard output (`log.format: json`): what log
/// shippers and `jq` expect. Integer and boolean metadata stay numbers.
///
/// Lines go through `LogLineWriter`, so no event loop waits on `write(2)`;
/// the access log, the one log line per request, skips `Logger.Metadata`
/// entirely (`AccessRecord.render`).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    let label: String
    let writer: LogLineWriter

    public init(label: String, level: Logger.Level, writer: LogLineWriter = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.writer = writer
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        event.metadata?.forEach { fields[$0.key] = $0.value }
        if let error = event.error { fields["error"] = "\(error)" }
        var out = Self.lineStart(level: event.level, label: label, message: event.message.description)
        for key in fields.keys.sorted() {
            out += ",\(Self.quote(key)):\(Self.render(fields[key]!))"
        }
        out += "}\n"
        writer.write(out, urgent: true)  // rare lines: out at once; the access log takes AccessRecord's batched path
        if event.level >= .error {
            writer.flush()  // on disk before whatever the error leads to (a crash must not swallow it)
        }
    }

    /// `{"ts":…,"level":…,"logger":…,"message":…` — the fields every line starts with.
    static func lineStart(level: Logger.Level, label: String, message: String) -> String {
        var out = ByteBuffer()
        LogLineBytes.write(into: &out, atMost: lineStartBound(label: label, message: message)) {
            writeLineStart(level: level, label: label, message: message, into: &$0)
        }
        return String(buffer: out)
    }

    /// The most bytes `writeLineStart` writes: its keys, a timestamp and a
    /// level (under 100 bytes together), and the label and message quoted.
    static func lineStartBound(label: String, message: String) -> Int {
        100 + LogLineBytes.quotedBound(label) + LogLineBytes.quotedBound(message)
    }

    /// As above, written into `line` (the access line's path: no string made).
    static func writeLineStart(level: Logger.Level, label: String, message: String, into line: inout LogLineBytes) {
        line.writeStaticString("{\"ts\":\"")
        writeTimestamp(into: &line)
        line.writeStaticString("\",\"level\":\"")
        line.writeString(level.rawValue)
        line.writeStaticString("\",\"logger\":")
        line.writeJSONQuoted(label)
        line.writeStaticString(",\"message\":")
        line.writeJSONQuoted(message)
    }

    private static func render(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): return quote(text)
        case .stringConvertible(let convertible):
            if convertible is Int || convertible is Double || convertible is Bool { return convertible.description }
            return quote(convertible.description)
        case .array(let values): return "[" + values.map(render).joined(separator: ",") + "]"
        case .dictionary(let dictionary):
            return "{" + dictionary.keys.sorted().map { "\(quote($0)):\(render(dictionary[$0]!))" }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ text: String) -> String {
        JSONString.quote(text)
    }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T06:41:52.172Z`, by
    /// hand: `String(format:)` cost more than the rest of an access line. The
    /// part up to the second is kept per thread and rebuilt once a second.
    static func writeTimestamp(into line: inout LogLineBytes) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let cache = TimestampCache.current
        if cache.second != now.tv_sec {
            cache.second = now.tv_sec
            cache.prefix = secondsText(now.tv_sec)
        }
        line.writeString(cache.prefix)
        line.writeDecimal(now.tv_nsec / 1_000_000, width: 3)
        line.writeByte(UInt8(ascii: "Z"))
    }

    /// `2026-11-22T06:41:52.`
    private static func secondsText(_ seconds: Int) -> String {
        var parts = tm()
        var seconds = seconds
        gmtime_r(&seconds, &parts)
        var out = ""
        func digits(_ value: Int, _ width: Int) {
            var text = String(value)
            while text.utf8.count < width { text = "0" + text }
            out += text
        }
        digits(Int(parts.tm_year) + 1900, 4); out += "-"
        digits(Int(parts.tm_mon) + 1, 2); out += "-"
        digits(Int(parts.tm_mday), 2); out += "T"
        digits(Int(parts.tm_hour), 2); out += ":"
        digits(Int(parts.tm_min), 2); out += ":"
        digits(Int(parts.tm_sec), 2); out += "."
        return out
    }
}

/// The current second's timestamp text, one per thread (no lock on the log path).
private final class TimestampCache: @unchecked Sendable {  // confined to its thread
    private static let perThread = ThreadSpecificVariable<TimestampCache>()
    var second = -1
    var prefix = ""

    static var current: TimestampCache {
        if let cache = perThread.currentValue { return cache }
        let cache = TimestampCache()
        perThread.currentValue = cache
        return cache
    }
}
