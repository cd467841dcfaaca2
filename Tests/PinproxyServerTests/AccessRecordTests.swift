import Foundation
import Logging
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// The access log's hand-rendered JSON line (`AccessRecord.render`) against the
/// same record logged through swift-log and `JSONLogHandler`: same keys, same
/// values, same types, the query string never logged.
@Suite("Access record rendering", .blockingWaits)
struct AccessRecordTests {
    static let label = "pinproxy.access"

    static let complete = AccessRecord(
        client: "127.0.0.1:54321", method: "GET", host: "api.spotify.test", path: "/v1/me/player?market=SE&token=secret",
        status: 200, bytesUp: 123, bytesDown: 45_678, seconds: 0.012_34, policy: "*.spotify.test",
        pin: "match", upstream: "127.0.0.1:8443", error: nil, mode: .intercept)

    static let minimal = AccessRecord(
        client: "10.0.0.7:40000", method: "CONNECT", host: "denied.test", path: "/",
        status: 403, bytesUp: 0, bytesDown: 0, seconds: 0, policy: "denied.test",
        pin: nil, upstream: nil, error: nil, mode: .connect)

    static let withError = AccessRecord(
        client: "127.0.0.1:1", method: "POST", host: "bad.test", path: "https://bad.test/upload?sig=abc",
        status: 502, bytesUp: 10, bytesDown: 0, seconds: 1.5, policy: "bad.test",
        pin: "mismatch_enforced", upstream: "127.0.0.1:9", error: "pin_mismatch", mode: .intercept)

    /// Quotes, backslashes, control characters and non-ASCII in every string field.
    static let needsEscaping = AccessRecord(
        client: "[::1]:5\"5", method: "G\\ET", host: "we\"ird\\host.test", path: "/a\"b\\c/\u{1}d\té?q=\"x\"\\",
        status: 418, bytesUp: 1, bytesDown: 2, seconds: 123.456_78, policy: "we\"ird\\*",
        pin: "pin \"quoted\"", upstream: "up\\stream\n:1", error: "line one\nline \"two\"\r\u{7}", mode: .forward)

    /// Every field present and as long as it renders: each string control
    /// characters only (six bytes each, escaped), the numbers at their widest,
    /// a duration past what `writeTenths` spells itself. `render` reserves the
    /// line's room from a bound, and this line needs all of it.
    static let atItsLongest: AccessRecord = {
        let controls = String(repeating: "\u{1}\u{1f}", count: 100)
        var record = AccessRecord(
            client: controls, method: controls, host: controls, path: "/" + controls, status: Int.min,
            bytesUp: Int.max, bytesDown: Int.min, seconds: -Double.greatestFiniteMagnitude / 10_000, policy: controls,
            pin: controls, upstream: controls, error: controls, mode: .transparent)
        record.identity = controls
        record.clientProtocol = .h2
        record.detail = controls
        return record
    }()

    static let records: [(String, AccessRecord)] = [
        ("complete", complete), ("minimal", minimal), ("withError", withError), ("needsEscaping", needsEscaping),
        ("atItsLongest", atItsLongest),
    ]

    // MARK: Helpers

    /// A logger on `JSONLogHandler` writing to a temp file, and the way to read what it wrote.
    final class CapturedLog {
        let dir: TemporaryDirectory
        let path: String
        let fd: Int32
        let writer: LogLineWriter

        init() throws {
            dir = try TemporaryDirectory("pinproxy-accesslog")
            path = dir.file("log.jsonl")
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
            guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
            writer = TestWriters.make(fileDescriptor: fd)
        }

        func logger(level: Logger.Level = .info, label: String = AccessRecordTests.label) -> Logger {
            let writer = self.writer
            var logger = Logger(label: label) { label in JSONLogHandler(label: label, level: level, writer: writer) }
            logger.logLevel = level
            return logger
        }

        func lines() -> [String] {
            writer.flush()
            let text = TextFile.read(path)
            return text.split(separator: "\n").map(String.init)
        }

        deinit { close(fd) }
    }

    static func parse(_ line: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(object as? [String: Any], "not a JSON object: \(line)")
    }

    /// The line `record.log(to: Logger)` produces through `JSONLogHandler`.
    static func loggerLine(_ record: AccessRecord) throws -> String {
        let log = try CapturedLog()
        record.log(to: log.logger())
        let lines = log.lines()
        #expect(lines.count == 1, "\(lines)")
        return try #require(lines.first)
    }

    static var timestamp: Regex<Substring> { #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/# }

    /// Equal JSON values of the same JSON type (strings as strings, numbers as numbers).
    static func sameJSONValue(_ a: Any?, _ b: Any?) -> Bool {
        switch (a, b) {
        case (let a as String, let b as String): return a == b
        case (is String, _), (_, is String): return false
        case (let a as NSNumber, let b as NSNumber): return a == b
        default: return false
        }
    }

    /// The line with its `ts` value blanked (the only field that may differ between two renderings).
    static func withoutTimestamp(_ line: String) -> String {
        line.replacing(#/^\{"ts":"[^"]*"/#, with: "{\"ts\":\"\"")
    }

    // MARK: Tests

    @Test(arguments: records.map(\.0))
    func theRenderedLineHasTheLoggersKeysAndValues(_ name: String) throws {
        let record = try #require(Self.records.first { $0.0 == name }?.1)
        let rendered = record.render(label: Self.label)
        #expect(rendered.hasSuffix("}\n"), "one line, newline-terminated")
        #expect(rendered.dropLast().contains("\n") == false, "no raw newline inside the line: \(rendered.debugDescription)")

        let direct = try Self.parse(rendered)
        let viaLogger = try Self.parse(try Self.loggerLine(record))
        #expect(Set(direct.keys) == Set(viaLogger.keys),
                "render-only: \(Set(direct.keys).subtracting(viaLogger.keys)), logger-only: \(Set(viaLogger.keys).subtracting(direct.keys))")
        for key in direct.keys.sorted() where key != "ts" {
            // Same JSON type too: a number on one side is a number on the other.
            #expect(Self.sameJSONValue(direct[key], viaLogger[key]),
                    "\(key): rendered \(String(describing: direct[key])) vs logger \(String(describing: viaLogger[key]))")
        }
        for line in [direct, viaLogger] {
            let ts = try #require(line["ts"] as? String)
            #expect(ts.wholeMatch(of: Self.timestamp) != nil, "ts \(ts)")
        }
    }

    @Test(arguments: records.map(\.0))
    func theRenderedLineIsTheLoggersLineByteForByteButForTheTimestamp(_ name: String) throws {
        // `render` promises the key order `JSONLogHandler` gives any line.
        let record = try #require(Self.records.first { $0.0 == name }?.1)
        let rendered = record.render(label: Self.label)
        let viaLogger = try Self.loggerLine(record) + "\n"
        #expect(Self.withoutTimestamp(rendered) == Self.withoutTimestamp(viaLogger))
    }

    @Test func theRenderedValuesAreTheRecordsWithNumbersAsNumbers() throws {
        let line = try Self.parse(Self.complete.render(label: Self.label))
        #expect(line["level"] as? String == "info")
        #expect(line["logger"] as? String == Self.label)
        #expect(line["message"] as? String == "request")
        #expect(line["client"] as? String == "127.0.0.1:54321")
        #expect(line["method"] as? String == "GET")
        #expect(line["host"] as? String == "api.spotify.test")
        #expect(line["path"] as? String == "/v1/me/player", "the query string is never logged")
        #expect(line["policy"] as? String == "*.spotify.test")
        #expect(line["pin"] as? String == "match")
        #expect(line["upstream"] as? String == "127.0.0.1:8443")
        #expect(line["mode"] as? String == "intercept")
        #expect(line["error"] == nil)
        for (key, value) in [("status", 200.0), ("bytes_up", 123), ("bytes_down", 45_678), ("duration_ms", 12.3)] {
            #expect(!(line[key] is String), "\(key) must be a JSON number")
            #expect((line[key] as? NSNumber)?.doubleValue == value, "\(key): \(String(describing: line[key]))")
        }
        let ts = try #require(line["ts"] as? String)
        #expect(ts.wholeMatch(of: Self.timestamp) != nil, "ts \(ts)")
    }

    @Test func theTimestampIsNowInUTC() throws {
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        // Across many lines (and so across second boundaries, on any thread's cached prefix).
        for _ in 0..<50 {
            let before = Date()
            let line = try Self.parse(Self.minimal.render(label: Self.label))
            let ts = try #require(line["ts"] as? String)
            let date = try #require(parser.date(from: ts), "ts \(ts) is not RFC 3339")
            // The wall clock's reading when rendered (a stale second or a wrong field is off by a second or more).
            #expect(date.timeIntervalSince(before) > -0.25, "ts \(ts) is before the call (\(before))")
            #expect(date.timeIntervalSince(Date()) < 0.25, "ts \(ts) is after the call")
            // Pacing, not a wait: 50 lines spread over 1.5 s cross a second boundary.
            usleep(30_000)
        }
    }

    @Test func optionalFieldsAreLeftOutWhenAbsent() throws {
        let line = try Self.parse(Self.minimal.render(label: Self.label))
        #expect(line["pin"] == nil)
        #expect(line["upstream"] == nil)
        #expect(line["error"] == nil)
        #expect(Set(line.keys) == ["ts", "level", "logger", "message", "bytes_down", "bytes_up", "client", "duration_ms",
                                   "host", "identity", "method", "mode", "path", "policy", "status"])
        // Always present, `-` for a client that proved no identity (docs/contract.md §15).
        #expect(line["identity"] as? String == "-")
        #expect((line["duration_ms"] as? NSNumber)?.doubleValue == 0)

        let failed = try Self.parse(Self.withError.render(label: Self.label))
        #expect(failed["error"] as? String == "pin_mismatch")
        #expect(failed["pin"] as? String == "mismatch_enforced")
        #expect(failed["path"] as? String == "/upload", "an absolute-form target logs its path, without the query")
        #expect((failed["duration_ms"] as? NSNumber)?.doubleValue == 1_500)
    }

    @Test func charactersThatNeedEscapingRoundTrip() throws {
        let record = Self.needsEscaping
        let line = try Self.parse(record.render(label: "we\"ird\\label"))
        #expect(line["logger"] as? String == "we\"ird\\label")
        #expect(line["client"] as? String == record.client)
        #expect(line["method"] as? String == record.method)
        #expect(line["host"] as? String == "we\"ird\\host.test")
        #expect(line["path"] as? String == "/a\"b\\c/\u{1}d\té", "unescaped, query dropped")
        #expect(line["policy"] as? String == record.policy)
        #expect(line["pin"] as? String == record.pin)
        #expect(line["upstream"] as? String == record.upstream)
        #expect(line["error"] as? String == record.error)
        #expect(line["mode"] as? String == record.mode.rawValue)
        #expect((line["duration_ms"] as? NSNumber)?.doubleValue == 123_456.8)
    }

    @Test func withoutQueryKeepsOnlyThePath() {
        #expect(AccessRecord.withoutQuery("/a/b?c=d") == "/a/b")
        #expect(AccessRecord.withoutQuery("/a/b") == "/a/b")
        #expect(AccessRecord.withoutQuery("/?") == "/")
        #expect(AccessRecord.withoutQuery("https://host.test/p?q=1") == "/p")
        #expect(AccessRecord.withoutQuery("http://host.test?q=1") == "/")
        #expect(AccessRecord.withoutQuery("http://host.test") == "/")
    }

    // MARK: AccessLog destination

    @Test func anAccessLogAboveInfoIsOffAndWritesNothing() throws {
        let log = try CapturedLog()
        for level in [Logger.Level.warning, .error, .critical] {
            let accessLog = AccessLog(log.logger(level: level))
            guard case .off = accessLog.destination else {
                Issue.record("level \(level): expected .off, got \(accessLog.destination)")
                continue
            }
            Self.complete.log(to: accessLog)
        }
        #expect(log.lines().isEmpty)
    }

    @Test func anAccessLogAtInfoOrBelowOnAPlainJSONHandlerRendersDirectly() throws {
        for level in [Logger.Level.info, .debug, .trace] {
            let log = try CapturedLog()
            let accessLog = AccessLog(log.logger(level: level))
            guard case .json(let handler) = accessLog.destination else {
                Issue.record("level \(level): expected .json, got \(accessLog.destination)")
                continue
            }
            #expect(handler.label == Self.label)
            Self.withError.log(to: accessLog)
            let lines = log.lines()
            #expect(lines.count == 1)
            let line = try #require(lines.first)
            #expect(Self.withoutTimestamp(line + "\n") == Self.withoutTimestamp(Self.withError.render(label: Self.label)))
        }
    }

    @Test func aJSONHandlerWithMetadataGoesThroughTheLoggerAndKeepsIt() throws {
        let log = try CapturedLog()
        var logger = log.logger()
        logger[metadataKey: "instance"] = "a"
        let accessLog = AccessLog(logger)
        guard case .logger = accessLog.destination else {
            Issue.record("expected .logger, got \(accessLog.destination)")
            return
        }
        Self.complete.log(to: accessLog)
        let line = try Self.parse(try #require(log.lines().first))
        #expect(line["instance"] as? String == "a")
        #expect(line["path"] as? String == "/v1/me/player")
    }

    @Test func aNonJSONHandlerGoesThroughTheLogger() {
        let logger = Logger(label: Self.label) { label in StreamLogHandler.standardError(label: label) }
        var atInfo = logger
        atInfo.logLevel = .info
        guard case .logger = AccessLog(atInfo).destination else {
            Issue.record("expected .logger for a non-JSON handler")
            return
        }
        var atError = logger
        atError.logLevel = .error
        guard case .off = AccessLog(atError).destination else {
            Issue.record("expected .off above info")
            return
        }
    }
}
