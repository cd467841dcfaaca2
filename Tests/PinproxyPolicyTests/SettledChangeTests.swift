@testable import PinproxyPolicy
import Testing

/// The watcher's decision, poll by poll, with no files and no clock.
struct SettledChangeTests {
    static func file(_ content: UInt8, size: Int64 = 10, time: Int64 = 1) -> WatchedFile? {
        WatchedFile(size: size, modifiedNanoseconds: time, inode: 7, digest: [content])
    }

    static let a: SettledChange.Files = ["p.yaml": file(1)]

    @Test func aChangeIsReloadedOnlyAtTheSecondPollThatSeesItTheSame() {
        var change = SettledChange(applied: Self.a)
        #expect(change.poll(Self.a) == .unchanged)
        let truncated: SettledChange.Files = ["p.yaml": Self.file(0, size: 0, time: 2)]
        let half: SettledChange.Files = ["p.yaml": Self.file(2, size: 5, time: 3)]
        let whole: SettledChange.Files = ["p.yaml": Self.file(3, size: 12, time: 4)]
        #expect(change.poll(truncated) == .settling)
        #expect(change.poll(half) == .settling)
        #expect(change.poll(whole) == .settling)
        #expect(change.poll(whole) == .reload)
        change.reloaded(whole, after: whole)
        #expect(change.poll(whole) == .unchanged)
    }

    @Test func aWriterStillAtWorkWithTheSameBytesIsStillMoving() {
        var change = SettledChange(applied: Self.a)
        #expect(change.poll(["p.yaml": Self.file(2, time: 2)]) == .settling)
        // Same content, but rewritten since: the writer has not finished.
        #expect(change.poll(["p.yaml": Self.file(2, time: 3)]) == .settling)
        #expect(change.poll(["p.yaml": Self.file(2, time: 3)]) == .reload)
    }

    @Test func aTouchAloneReloadsNothing() {
        var change = SettledChange(applied: Self.a)
        #expect(change.poll(["p.yaml": Self.file(1, time: 9)]) == .unchanged)
        #expect(change.poll(["p.yaml": Self.file(1, time: 9)]) == .unchanged)
    }

    @Test func aFileThatAppearsOrGoesIsAChange() {
        var change = SettledChange(applied: Self.a)
        let added: SettledChange.Files = ["p.yaml": Self.file(1), "q.yaml": Self.file(5)]
        #expect(change.poll(added) == .settling)
        #expect(change.poll(added) == .reload)
        change.reloaded(added, after: added)
        let unreadable: SettledChange.Files = ["p.yaml": Self.file(1), "q.yaml": nil]
        #expect(change.poll(unreadable) == .settling)
        #expect(change.poll(unreadable) == .reload)
    }

    @Test func anEditDuringTheReloadIsStillSeen() {
        var change = SettledChange(applied: Self.a)
        let b: SettledChange.Files = ["p.yaml": Self.file(2)]
        _ = change.poll(b)
        #expect(change.poll(b) == .reload)
        // The reload ran on `b`; by the time it finished the file was `c`.
        let c: SettledChange.Files = ["p.yaml": Self.file(3, time: 5)]
        change.reloaded(b, after: c)
        #expect(change.poll(c) == .settling)
        #expect(change.poll(c) == .reload)
    }
}
