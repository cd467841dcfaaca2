import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Gives the memory a burst of connections took back to the system once the
/// burst has drained.
///
/// glibc's malloc keeps what a process frees in its arenas (one per thread
/// that allocated, up to eight per core) for reuse, and returns little of it
/// on its own: measured with `bench/burst-memory.py`, 2,000 intercepted
/// connections took a debug build from 46 to 97 MiB, and after all of them
/// closed it still held 100 MiB. A second burst reused that memory (101.6
/// MiB), so it is the allocator keeping freed memory, not pinproxy holding
/// it. `malloc_trim(0)` hands the free pages of every arena back.
///
/// It runs when the open client connections fall to an eighth of the peak
/// since the last trim (to zero after a small peak), if that peak was at
/// least `minimumPeak`, and at most once per `delay`; on a thread of its own,
/// since it walks and locks every arena. Elsewhere than glibc it does nothing.
final class MemoryReturn: Sendable {
    static let minimumPeak = 256

    private struct State {
        var peak = 0
        var current = 0
        var scheduled = false
    }

    private let state = NIOLockedValueBox(State())
    private let delay: TimeAmount
    private let logger: Logger

    init(delay: TimeAmount = .seconds(2), logger: Logger = Logger(label: "pinproxy")) {
        self.delay = delay
        self.logger = logger
    }

    /// The number of open client connections after each change.
    func connectionsChanged(to count: Int, on loop: any EventLoop) {
        let schedule = state.withLockedValue { state -> Bool in
            state.current = count
            state.peak = max(state.peak, count)
            guard !state.scheduled, Self.drained(count, peak: state.peak) else { return false }
            state.scheduled = true
            return true
        }
        guard schedule else { return }
        // Wait a moment: a burst closes over a few hundred milliseconds.
        loop.scheduleTask(in: delay) { self.trimIfStillDrained() }
    }

    static func drained(_ count: Int, peak: Int) -> Bool {
        peak >= minimumPeak && count <= peak / 8
    }

    private func trimIfStillDrained() {
        let peak = state.withLockedValue { state -> Int? in
            state.scheduled = false
            guard Self.drained(state.current, peak: state.peak) else { return nil }
            let peak = state.peak
            state.peak = state.current
            return peak
        }
        guard let peak, let trim = Self.mallocTrim else { return }
        let logger = self.logger
        Thread.detachNewThread {
            let before = Self.residentBytes()
            let started = ContinuousClock.now
            _ = trim(0)
            let took = ContinuousClock.now - started
            let after = Self.residentBytes()
            logger.info("returned freed memory to the system after a burst", metadata: [
                "peak_connections": .stringConvertible(peak),
                "resident_mib_before": .stringConvertible(before / 1_048_576), "resident_mib_after": .stringConvertible(after / 1_048_576),
                "duration_ms": .stringConvertible(Int(took.components.seconds * 1000 + took.components.attoseconds / 1_000_000_000_000_000)),
            ])
        }
    }

    /// glibc's `malloc_trim`, looked up at run time: its header is not part
    /// of Swift's Glibc module, and other C libraries do not have it.
    static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if os(Linux)
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()

    /// Resident set size from /proc/self/statm (0 where there is none).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
