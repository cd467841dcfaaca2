import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy

/// One JSON object per line on standard output (`log.format: json`): what log
/// shippers and `jq` expect. Integer and boolean metadata stay numbers.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private static let lock = NIOLock()

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level
        let message = event.message
        var fields = metadata
        event.metadata?.forEach { fields[$0.key] = $0.value }
        if let error = event.error { fields["error"] = "\(error)" }
        var out = "{\"ts\":\"\(Self.timestamp())\",\"level\":\"\(level.rawValue)\",\"logger\":\(Self.quote(label)),\"message\":\(Self.quote(message.description))"
        for key in fields.keys.sorted() {
            out += ",\(Self.quote(key)):\(Self.render(fields[key]!))"
        }
        out += "}\n"
        let bytes = Array(out.utf8)
        Self.lock.withLock {
            // One write(2) per line, so lines from threads never interleave.
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
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

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, now.tv_nsec / 1_000_000)
    }
}
