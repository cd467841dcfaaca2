import Foundation
import NIOConcurrencyHelpers

/// Writes log lines to a file descriptor from a thread of its own, in batches.
///
/// Why: a `write(2)` per access-log line on the event loop cost about a fifth
/// of pinproxy's CPU under keep-alive load (bench/README.md). Here an event
/// loop only appends bytes under a lock; the writer thread wakes, takes
/// everything pending and writes it with one call, so under load one syscall
/// carries many lines. Lines are never dropped: if the descriptor blocks, the
/// buffer grows up to `maxPending`, and past that the loggers wait, as a plain
/// blocking write would have made them. `flush()` returns once everything
/// appended before it is written; it runs at exit.
public final class LogLineWriter: @unchecked Sendable {
    /// Standard output, where `log.format: json` lines go.
    public static let standardOutput = LogLineWriter(fileDescriptor: STDOUT_FILENO)

    private enum Phase: Equatable {
        case idle       // nothing pending, the writer waits
        case pending    // lines wait for the writer
        case writing    // the writer is writing a batch; more may be pending
    }

    private let fileDescriptor: Int32
    private let maxPending: Int
    private let condition = ConditionLock<Phase>(value: .idle)
    /// Guarded by `condition`; `phase` mirrors its value (reading
    /// `ConditionLock.value` while holding the lock would deadlock).
    private var pending: [UInt8] = []
    private var phase = Phase.idle

    init(fileDescriptor: Int32, maxPending: Int = 8 << 20) {
        self.fileDescriptor = fileDescriptor
        self.maxPending = maxPending
        pending.reserveCapacity(64 << 10)
        let thread = Thread { [unowned self] in self.run() }
        thread.name = "pinproxy-log"
        thread.start()
        if fileDescriptor == STDOUT_FILENO {
            atexit { LogLineWriter.standardOutput.flush() }
        }
    }

    /// Appends one line (its bytes, newline included).
    public func write(_ line: String) {
        var line = line
        line.withUTF8 { append($0) }
    }

    public func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        if pendingIsFull() {
            flush()  // the writer is behind (stdout blocked): wait, rather than drop or grow without bound
        }
        condition.lock()
        pending.append(contentsOf: bytes)
        if phase == .idle { phase = .pending }
        condition.unlock(withValue: phase)
    }

    /// Returns once every line appended before this call has been written.
    public func flush() {
        condition.lock(whenValue: .idle)
        condition.unlock(withValue: .idle)
    }

    private func pendingIsFull() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return pending.count >= maxPending
    }

    private func run() {
        var batch: [UInt8] = []
        batch.reserveCapacity(64 << 10)
        while true {
            condition.lock(whenValue: .pending)
            swap(&batch, &pending)
            phase = .writing
            condition.unlock(withValue: phase)
            writeAll(batch)
            batch.removeAll(keepingCapacity: true)
            condition.lock()
            phase = pending.isEmpty ? .idle : .pending
            condition.unlock(withValue: phase)
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }  // stdout is gone: nothing left to tell
                offset += written
            }
        }
    }
}
