import NIOCore
@testable import PinproxyTLS
import Testing

/// `RecordBufferKeeping`: busy means `busyRecords` records within
/// `quietInterval`; kept until an interval with fewer.
@Suite("Record buffer keeping")
struct RecordBufferKeepingTests {
    static let interval = RecordBufferKeeping.quietInterval
    static let busy = RecordBufferKeeping.busyRecords

    /// Moves `count` records, `apart` from each other, from `start`; whether the last one began keeping.
    static func move(_ keeping: inout RecordBufferKeeping, _ count: Int, from start: NIODeadline,
                     apart: TimeAmount = .zero) -> [Bool] {
        (0..<count).map { index in keeping.recordMoved(now: { start + .nanoseconds(apart.nanoseconds * Int64(index)) }) }
    }

    @Test func busyRecordsWithinTheIntervalStartKeepingOnTheLastOfThem() {
        var keeping = RecordBufferKeeping()
        let started = Self.move(&keeping, Self.busy, from: .uptimeNanoseconds(1_000_000_000))
        #expect(started == Array(repeating: false, count: Self.busy - 1) + [true])
        #expect(keeping.keeping)
        // Further records while keeping start nothing.
        let more = Self.move(&keeping, 3, from: .uptimeNanoseconds(1_000_000_000))
        #expect(more == [false, false, false])
    }

    @Test func theSameRecordsSpreadOverMoreThanTheIntervalDoNot() {
        var keeping = RecordBufferKeeping()
        // `busy` records, the last one just past the interval after the first.
        let apart = TimeAmount.nanoseconds(Self.interval.nanoseconds / Int64(Self.busy - 1) + 1)
        let started = Self.move(&keeping, Self.busy * 5, from: .uptimeNanoseconds(1_000_000_000), apart: apart)
        #expect(!started.contains(true))
        #expect(!keeping.keeping)
        let kept = keeping.check()
        #expect(!kept, "a check while not keeping keeps nothing")
    }

    @Test func aCheckKeepsAfterABusyIntervalAndStopsAfterAQuieterOne() {
        var keeping = RecordBufferKeeping()
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        _ = Self.move(&keeping, Self.busy, from: start)
        _ = Self.move(&keeping, Self.busy, from: start)
        let keptOn = keeping.check()
        #expect(keptOn, "busy since keeping began")
        _ = Self.move(&keeping, Self.busy - 1, from: start)
        let keptOnShort = keeping.check()
        #expect(!keptOnShort, "one record short of busy")
        #expect(!keeping.keeping)
        // Busy again: keeps again.
        let again = Self.move(&keeping, Self.busy, from: start + .seconds(5))
        #expect(again.last == true)
    }
}
