import Foundation
import NIOConcurrencyHelpers
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// Every writer a test makes. A writer's thread holds it for the life of
/// the process (writers are process-wide in pinproxy), so keeping them here
/// costs nothing and makes that explicit.
enum TestWriters {
    private static let kept = NIOLockedValueBox<[LogLineWriter]>([])

    static func make(fileDescriptor: Int32, maxPending: Int? = nil) -> LogLineWriter {
        let writer = maxPending.map { LogLineWriter(fileDescriptor: fileDescriptor, maxPending: $0) }
            ?? LogLineWriter(fileDescriptor: fileDescriptor)
        kept.withLockedValue { $0.append(writer) }
        return writer
    }
}

/// The batched log writer: what is appended before `flush()` is on disk after
/// it, whole, once, and in each appender's order; a full buffer makes appenders
/// wait, never drop.
@Suite("LogLineWriter", .blockingWaits)
struct LogLineWriterTests {
    /// A temp file open for writing, and a writer on its descriptor.
    final class Target {
        let dir: TemporaryDirectory
        let path: String
        let fd: Int32
        let writer: LogLineWriter

        init(maxPending: Int? = nil) throws {
            dir = try TemporaryDirectory("pinproxy-logwriter")
            path = dir.file("log.jsonl")
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o600)
            guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
            writer = TestWriters.make(fileDescriptor: fd, maxPending: maxPending)
        }

        /// The file's lines (without their newlines); fails if the file does not end in one.
        func lines() throws -> [Substring] {
            let text = try TextFile.readChecked(path)
            guard text.isEmpty || text.hasSuffix("\n") else {
                throw TestSupportError("the file ends in a partial line: \(text.suffix(80).debugDescription)")
            }
            return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        }

        var bytes: Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1 }

        deinit {
            // Only after a flush (or a failed test): the writer is idle and writes no more.
            close(fd)
        }
    }

    /// Runs `body` on a thread of its own; false if it has not returned within
    /// `timeout` (a hang becomes a failure, not a stuck test run).
    static func returns(within timeout: TimeInterval = 30, _ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            body()
            done.signal()
        }
        thread.start()
        return done.wait(timeout: .now() + timeout) == .success
    }

    /// Runs `count` threads at once, each `body(index)`; false if they have not all returned within `timeout`.
    /// `threads` threads each write `perThread` tagged lines (and flush every
    /// `flushEvery` lines, if given); whether they all finished.
    static func appendFromThreads(_ writer: LogLineWriter, threads: Int, perThread: Int, flushEvery: Int? = nil) -> Bool {
        runThreads(threads) { thread in
            for sequence in 0..<perThread {
                writer.write(line(thread: thread, sequence: sequence))
                if let flushEvery, sequence % flushEvery == 0 { writer.flush() }
            }
        }
    }

    static func runThreads(_ count: Int, within timeout: TimeInterval = 60, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
        let start = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        for index in 0..<count {
            let thread = Thread {
                start.wait()
                body(index)
                done.signal()
            }
            thread.start()
        }
        for _ in 0..<count { start.signal() }
        let deadline = DispatchTime.now() + timeout
        for _ in 0..<count where done.wait(timeout: deadline) != .success {
            return false
        }
        return true
    }

    /// `T<thread> S<seq> <filler>`: the filler's letter and length follow from
    /// thread and sequence, so a torn or spliced line cannot pass for a whole one.
    static func line(thread: Int, sequence: Int) -> String {
        let letter = Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(thread % 26)))
        return "T\(thread) S\(sequence) " + String(repeating: letter, count: 10 + (sequence * 7 + thread) % 90) + "\n"
    }

    static func parse(_ line: Substring) -> (thread: Int, sequence: Int)? {
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].hasPrefix("T"), parts[1].hasPrefix("S"),
              let thread = Int(parts[0].dropFirst()), let sequence = Int(parts[1].dropFirst()),
              thread >= 0, sequence >= 0 else { return nil }
        guard line + "\n" == Self.line(thread: thread, sequence: sequence) else { return nil }
        return (thread, sequence)
    }

    /// Every line of every thread present exactly once, whole, each thread's in order.
    static func checkInterleaved(_ lines: [Substring], threads: Int, perThread: Int) {
        var next = [Int](repeating: 0, count: threads)
        var malformed: [Substring] = []
        var outOfOrder: [String] = []
        for line in lines {
            guard let (thread, sequence) = parse(line), thread < threads else {
                malformed.append(line)
                continue
            }
            if sequence != next[thread] {
                outOfOrder.append("thread \(thread): expected S\(next[thread]), found S\(sequence)")
            }
            next[thread] = sequence + 1
        }
        #expect(malformed.isEmpty, "\(malformed.count) torn or unknown lines, e.g. \(malformed.prefix(3))")
        #expect(outOfOrder.isEmpty, "\(outOfOrder.count) lines out of order (lost, repeated or reordered), e.g. \(outOfOrder.prefix(3))")
        #expect(next == [Int](repeating: perThread, count: threads), "lines seen per thread: \(next)")
        #expect(lines.count == threads * perThread)
    }

    @Test func linesAppearWholeAndInOrderAfterFlush() throws {
        let target = try Target()
        var expected: [String] = []
        for sequence in 0..<500 {
            let line = Self.line(thread: 0, sequence: sequence)
            expected.append(String(line.dropLast()))
            target.writer.write(line)
        }
        // Bytes through `append` are the same as through `write`.
        let raw = Array("raw bytes via append\n".utf8)
        raw.withUnsafeBufferPointer { target.writer.append($0) }
        expected.append("raw bytes via append")
        // Non-ASCII text goes out as its UTF-8.
        target.writer.write("{\"host\":\"bücher.test\",\"path\":\"/∑\"}\n")
        expected.append("{\"host\":\"bücher.test\",\"path\":\"/∑\"}")

        let writer = target.writer
        #expect(Self.returns { writer.flush() }, "flush() did not return")
        #expect(try target.lines().map(String.init) == expected)
    }

    @Test func linesReachTheFileWithoutAFlush() throws {
        // Nothing calls flush() on the request path: the writer must get there by itself.
        let target = try Target()
        target.writer.write("not flushed\n")
        #expect(pollUntilBlocking(timeout: 10) { (try? target.lines()) == ["not flushed"] }, "the line never reached the file")
    }

    @Test func flushWithNothingPendingReturnsAndWritesNothing() throws {
        let target = try Target()
        let writer = target.writer
        #expect(Self.returns { writer.flush() })
        #expect(Self.returns { writer.flush() })
        #expect(target.bytes == 0)
        writer.write("one\n")
        #expect(Self.returns { writer.flush() })
        #expect(Self.returns { writer.flush() })
        #expect(try target.lines() == ["one"])
    }

    @Test func eachFlushCoversEverythingAppendedBeforeIt() throws {
        let target = try Target()
        let writer = target.writer
        for round in 0..<20 {
            for sequence in 0..<(round * 13 + 1) {
                writer.write(Self.line(thread: round, sequence: sequence))
            }
            #expect(Self.returns { writer.flush() }, "flush \(round) did not return")
            let lines = try target.lines()
            let expected = (0...round).reduce(0) { $0 + $1 * 13 + 1 }
            #expect(lines.count == expected, "after flush \(round)")
        }
    }

    @Test func concurrentAppendersLoseNothingAndTearNoLine() throws {
        let target = try Target()
        let writer = target.writer
        let threads = 4, perThread = 2_000
        #expect(Self.appendFromThreads(writer, threads: threads, perThread: perThread), "the appending threads did not finish")
        #expect(Self.returns { writer.flush() }, "flush() did not return")
        Self.checkInterleaved(try target.lines(), threads: threads, perThread: perThread)
    }

    @Test func concurrentAppendersAndFlushersLoseNothing() throws {
        let target = try Target()
        let writer = target.writer
        let threads = 4, perThread = 1_000
        // Every thread flushes now and then while the others append.
        #expect(Self.appendFromThreads(writer, threads: threads, perThread: perThread, flushEvery: 97),
                "the appending threads did not finish")
        #expect(Self.returns { writer.flush() }, "flush() did not return")
        Self.checkInterleaved(try target.lines(), threads: threads, perThread: perThread)
    }

    @Test func aSmallPendingLimitMakesAppendersWaitInsteadOfDropping() throws {
        // 64 bytes: every line (up to ~110 bytes) alone fills the buffer.
        let target = try Target(maxPending: 64)
        let writer = target.writer
        let threads = 4, perThread = 1_500
        #expect(Self.appendFromThreads(writer, threads: threads, perThread: perThread),
                "the appending threads did not finish (an appender waited forever?)")
        #expect(Self.returns { writer.flush() }, "flush() did not return")
        Self.checkInterleaved(try target.lines(), threads: threads, perThread: perThread)
    }

    @Test func aSmallPendingLimitWithOneAppenderKeepsEveryLineInOrder() throws {
        let target = try Target(maxPending: 64)
        let writer = target.writer
        #expect(Self.returns {
            for sequence in 0..<5_000 {
                writer.write(Self.line(thread: 3, sequence: sequence))
            }
        }, "appending did not finish")
        #expect(Self.returns { writer.flush() })
        let lines = try target.lines()
        #expect(lines.count == 5_000)
        #expect(lines.enumerated().allSatisfy { index, line in
            Self.parse(line).map { $0.thread == 3 && $0.sequence == index } ?? false
        })
    }

    /// While the descriptor blocks, lines wait in a buffer that grows (up to
    /// `maxPending`); once they are written, that storage is given back, not
    /// kept for the life of the process.
    @Test func aBufferThatGrewWhileTheDescriptorBlockedIsGivenBackOnceWritten() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }
        // The pipe full before the first line: the writer's first write blocks at once.
        let flags = fcntl(writeEnd, F_GETFL)
        _ = fcntl(writeEnd, F_SETFL, flags | O_NONBLOCK)
        var filler = 0
        let block = [UInt8](repeating: UInt8(ascii: "-"), count: 4_096)
        while true {
            let count = block.withUnsafeBytes { Foundation.write(writeEnd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            filler += count
        }
        _ = fcntl(writeEnd, F_SETFL, flags)
        #expect(filler > 0)

        // 6 MiB of lines (below the 8 MiB that makes appenders wait): whichever
        // part the blocked writer took, the other has grown past 3 MiB.
        let writer = TestWriters.make(fileDescriptor: writeEnd)
        let line = String(repeating: "x", count: 1_023) + "\n"
        let lines = 6 * (1 << 20) / 1_024
        for _ in 0..<lines { writer.write(line) }

        let expected = filler + lines * 1_024
        let received = NIOLockedValueBox(0)
        let drained = DispatchSemaphore(value: 0)
        let reader = Thread {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            var total = 0
            while total < expected {
                let count = read(readEnd, &chunk, chunk.count)
                if count <= 0 { break }
                total += count
            }
            received.withLockedValue { $0 = total }
            drained.signal()
        }
        reader.start()
        #expect(Self.returns { writer.flush() }, "flush() did not return")
        #expect(drained.wait(timeout: .now() + 30) == .success, "the reader did not get every line")
        #expect(received.withLockedValue { $0 } == expected, "every line was written")
        // Kept, each buffer is at most `keptCapacity`; the grown one alone would be 4 MiB or more.
        #expect(writer.retainedCapacity <= 2 * LogLineWriter.keptCapacity,
                "a grown buffer was kept: \(writer.retainedCapacity) bytes")
        close(writeEnd)
    }

    /// A writer made and dropped at once (its thread not yet started) must not
    /// take the process down: the thread holds the writer, not `unowned`.
    @Test
    func aWriterReleasedAtOnceDoesNotCrash() throws {
        let dir = try TemporaryDirectory("pinproxy-logwriter")
        let fd = open(dir.file("log"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        for index in 0..<50 {
            LogLineWriter(fileDescriptor: fd).write("dropped \(index)\n", urgent: true)
        }
        // Each writer's thread still writes its line: the writers live on.
        #expect(pollUntilBlocking(timeout: 10) {
            TextFile.read(dir.file("log")).split(separator: "\n").count == 50
        })
    }
}
