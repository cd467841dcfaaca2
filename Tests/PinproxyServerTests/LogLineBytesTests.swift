import Foundation
import NIOCore
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// The access line is written straight into the log writer's batch (issue
/// 33): numbers and durations spelled as `String` spells them, and a line
/// appended by rendering lands whole and in order with the others.
@Suite("Log line bytes")
struct LogLineBytesTests {
    static func written(_ write: (inout LogLineBytes) -> Void) -> String {
        var buffer = ByteBuffer()
        LogLineBytes.write(into: &buffer, atMost: 512, write)
        return String(buffer: buffer)
    }

    @Test func integersAreSpelledAsStringSpellsThem() {
        for value in [0, 1, 9, 10, 99, 100, 128, 45_678, 1_048_576, -1, -10, -987_654_321, Int.max, Int.min] {
            #expect(Self.written { $0.writeDecimal(value) } == String(value))
        }
        #expect(Self.written { $0.writeDecimal(7, width: 3) } == "007")
        #expect(Self.written { $0.writeDecimal(42, width: 3) } == "042")
        #expect(Self.written { $0.writeDecimal(999, width: 3) } == "999")
        #expect(Self.written { $0.writeDecimal(2026, width: 2) } == "2026")
    }

    /// `duration_ms` was `String((seconds * 10_000).rounded() / 10)`: the
    /// same text, for every duration a request can have.
    @Test func durationsAreSpelledAsDoubleDescriptionSpellsThem() {
        var seconds: [Double] = [0, 0.000_04, 0.000_05, 0.000_1, 0.001, 0.012_34, 0.1, 1, 1.5, 59.999_99, 123.456_78, 86_400, 1e9]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            seconds.append(Double(state >> 11) / Double(1 << 53) * pow(10, Double(state % 9) - 4))
        }
        for value in seconds {
            let tenths = (value * 10_000).rounded()
            #expect(Self.written { $0.writeTenths(tenths) } == String(tenths / 10), "\(value) s")
        }
        for odd in [-1.0, -0.0, .infinity, .nan, 1e17] {
            #expect(Self.written { $0.writeTenths(odd) } == String(odd / 10))
        }
    }

    @Test func jsonQuotingMatchesJSONString() {
        let controls = String(decoding: (0..<0x20).map { UInt8($0) }, as: UTF8.self)
        for text in ["", "plain", "/v1/me/player", "quote\"d", "back\\slash", "new\nline", "\u{1}\u{1f}", "bücher ∑", "tab\there\r", controls + "é\u{7f}"] {
            #expect(Self.written { $0.writeJSONQuoted(text) } == "\"" + JSONString.escape(text) + "\"")
            #expect(Self.written { $0.writeJSONQuoted(Substring(text)) } == "\"" + JSONString.escape(text) + "\"")
        }
    }

    /// The bound is what `writeJSONQuoted` can take at most: a text of
    /// control characters only, each six bytes escaped, fills it exactly.
    @Test func aQuotedTextAtItsLongestFillsItsBoundExactly() {
        let text = String(repeating: "\u{1}", count: 40)
        var buffer = ByteBuffer()
        LogLineBytes.write(into: &buffer, atMost: LogLineBytes.quotedBound(text)) { $0.writeJSONQuoted(text) }
        #expect(buffer.readableBytes == LogLineBytes.quotedBound(text))
        #expect(String(buffer: buffer) == "\"" + JSONString.escape(text) + "\"")
    }

    /// Lines written one after another land after what the buffer held.
    @Test func linesAppendToWhatTheBufferHolds() {
        var buffer = ByteBuffer(string: "before;")
        LogLineBytes.write(into: &buffer, atMost: 16) { $0.writeDecimal(-42) }
        LogLineBytes.write(into: &buffer, atMost: 16) { $0.writeStaticString(";after") }
        #expect(String(buffer: buffer) == "before;-42;after")
    }

    @Test func aPathWithoutItsQueryIsASliceOfAnOriginFormTarget() {
        let target = "/v1/me/player?token=secret"
        let path = AccessRecord.pathWithoutQuery(target)
        #expect(path == "/v1/me/player")
        #expect(path.base == target, "no string made for the common line")
        #expect(AccessRecord.pathWithoutQuery("https://host.test/p?q=1") == "/p")
    }

    @Test func renderedLinesLandWholeAndInOrderWithWrittenOnes() throws {
        let dir = try TemporaryDirectory("pinproxy-linebytes")
        let path = dir.file("log.jsonl")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        let writer = TestWriters.make(fileDescriptor: fd)
        var expected: [String] = []
        for index in 0..<2_000 {
            let line = "{\"n\":\(index)}\n"
            if index % 3 == 0 {
                writer.write(line)
            } else {
                writer.appendLine { batch in
                    LogLineBytes.write(into: &batch, atMost: 64) { $0.writeString("{\"n\":"); $0.writeDecimal(index); $0.writeString("}\n") }
                }
            }
            expected.append(line)
        }
        writer.flush()
        #expect(try TextFile.readChecked(path) == expected.joined())
    }
}
