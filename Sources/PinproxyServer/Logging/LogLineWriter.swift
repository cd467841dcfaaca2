import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// Writes log lines to a file descriptor from a thread of its own, in batches.
///
/// Why: a `write(2)` per access-log line on the event loop cost about a fifth
/// of pinproxy's CPU under keep-alive load (bench/README.md). Here an event
/// loop only appends bytes under a lock. The writer thread writes what is
/// pending every `interval` (like Envoy's access-log flush interval), or at
/// once when `batchBytes` are waiting or an urgent line (anything but the
/// access log) arrives, so under load one syscall carries
/// hundreds of lines and no request pays for waking a thread. Lines are never
/// dropped: if the descriptor blocks, the buffer grows up to `maxPending`,
/// and past that the loggers wait, as a plain blocking write would have made
/// them; once written, a buffer that grew so is given back. `flush()`
/// returns once everything appended before it is written; it runs at exit.
public final class LogLineWriter: @unchecked Sendable {
    /// Standard output, where `log.format: json` lines go.
    public static let standardOutput = LogLineWriter(fileDescriptor: STDOUT_FILENO)

    private enum Phase: Equatable {
        case idle       // the writer waits for its interval (lines may be pending)
        case pending    // the writer is wanted now (a full batch, or a flush)
        case writing    // the writer is writing a batch; more may be pending
    }

    static let interval = 0.05
    static let batchBytes = 64 << 10
    /// A buffer larger than this is given back once written (a fresh one of
    /// `batchBytes` takes its place): it grew while the descriptor was slow,
    /// up to `maxPending`. Under load the writer takes a batch somewhat later
    /// than `batchBytes` fill it, so its buffers grow to a few hundred KiB
    /// and are kept, not taken and freed for every batch.
    static let keptCapacity = 1 << 20

    private let fileDescriptor: Int32
    private let maxPending: Int
    private let condition = ConditionLock<Phase>(value: .idle)
    /// Guarded by `condition`; `phase` mirrors its value (reading
    /// `ConditionLock.value` while holding the lock would deadlock).
    private var pending = ByteBuffer()
    private var phase = Phase.idle
    /// A `flush()` waits, or an urgent line came: write what is pending now,
    /// not at the next interval.
    private var writeSoon = false
    /// The writer thread's batch's capacity after its last write (guarded by
    /// `condition`), for `retainedCapacity`.
    private var batchCapacity = 0

    init(fileDescriptor: Int32, maxPending: Int = 8 << 20) {
        self.fileDescriptor = fileDescriptor
        self.maxPending = maxPending
        pending.reserveCapacity(Self.batchBytes)
        // The thread holds the writer for the life of the process (writers are
        // process-wide: standard output); an unowned capture could be read
        // after a writer released before its thread started.
        let thread = Thread { self.run() }
        thread.name = "pinproxy-log"
        thread.start()
        if fileDescriptor == STDOUT_FILENO {
            // Every line out before the process ends, however `pinproxy run` returns.
            atexit { LogLineWriter.standardOutput.flush() }
        }
    }

    /// Appends one line (its bytes, newline included). `urgent` lines (all
    /// but the access log: start-up, warnings, errors) wake the writer at once,
    /// and carry the lines queued before them along; access lines wait for the
    /// interval or a full batch.
    public func write(_ line: String, urgent: Bool = false) {
        var line = line
        line.withUTF8 { append($0, urgent: urgent) }
    }

    public func append(_ bytes: UnsafeBufferPointer<UInt8>, urgent: Bool = false) {
        lockWithRoom()
        pending.writeBytes(bytes)
        unlockAfterAppending(urgent: urgent)
    }

    /// Appends one line that `render` writes (newline included) straight
    /// into the pending batch: the access line's path, which so makes no
    /// string and no buffer of its own. `render` runs under the writer's
    /// lock, so it must only write (a line is a few hundred bytes, rendered
    /// in well under a microsecond; the writer thread takes the lock only
    /// to swap batches).
    func appendLine(_ render: (inout ByteBuffer) -> Void) {
        lockWithRoom()
        render(&pending)
        unlockAfterAppending(urgent: false)
    }

    /// Takes the lock once the pending batch has room.
    private func lockWithRoom() {
        condition.lock()
        while pending.readableBytes >= maxPending {
            // The writer is behind (stdout blocked): wait, rather than drop or grow without bound.
            writeSoon = true
            if phase == .idle { phase = .pending }
            condition.unlock(withValue: phase)
            condition.lock(whenValue: .idle)
        }
    }

    private func unlockAfterAppending(urgent: Bool) {
        if urgent || pending.readableBytes >= Self.batchBytes { writeSoon = true }
        if phase == .idle && writeSoon {
            phase = .pending
            condition.unlock(withValue: phase)  // wakes the writer
        } else {
            condition.unlock()  // the writer's interval, or its current batch's end, will take it
        }
    }

    /// Returns once every line appended before this call has been written.
    public func flush() {
        condition.lock()
        if pending.readableBytes == 0 && phase == .idle {
            condition.unlock()
            return
        }
        writeSoon = true
        if phase == .idle { phase = .pending }
        condition.unlock(withValue: phase)
        condition.lock(whenValue: .idle)
        condition.unlock()
    }

    private func run() {
        var batch = ByteBuffer()
        batch.reserveCapacity(Self.batchBytes)
        while true {
            if !condition.lock(whenValue: .pending, timeoutSeconds: Self.interval) {
                condition.lock()
            }
            if pending.readableBytes == 0 {
                writeSoon = false
                phase = .idle
                condition.unlock(withValue: phase)
                continue
            }
            swap(&batch, &pending)
            writeSoon = false
            phase = .writing
            condition.unlock(withValue: phase)
            writeAll(batch)
            Self.emptyForReuse(&batch)  // the writer's alone: no lock
            condition.lock()
            if pending.readableBytes == 0 { Self.emptyForReuse(&pending) }
            batchCapacity = batch.capacity
            phase = writeSoon && pending.readableBytes > 0 ? .pending : .idle
            condition.unlock(withValue: phase)
        }
    }

    /// Empties a written (or empty) buffer for the next batch, keeping its
    /// storage unless it grew past `keptCapacity`.
    private static func emptyForReuse(_ buffer: inout ByteBuffer) {
        guard buffer.capacity > keptCapacity else { return buffer.clear() }
        buffer = ByteBuffer()
        buffer.reserveCapacity(batchBytes)
    }

    /// The bytes of storage the two buffers keep between batches (tests).
    var retainedCapacity: Int {
        condition.lock()
        defer { condition.unlock() }
        return pending.capacity + batchCapacity
    }

    private func writeAll(_ bytes: ByteBuffer) {
        bytes.withUnsafeReadableBytes { buffer in
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
