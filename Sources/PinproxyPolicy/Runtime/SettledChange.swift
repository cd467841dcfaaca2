import Foundation
import PinproxyTLS

/// What the policy watcher sees of one file at one poll: nil when the file
/// is missing or unreadable.
struct WatchedFile: Sendable, Equatable {
    /// Size and modification time: a writer still at work moves them.
    var size: Int64
    var modifiedNanoseconds: Int64
    /// A Kubernetes ConfigMap swaps a symlink: the target's inode changes.
    var inode: UInt64
    /// SHA-256 of the content: an edit in the same instant that keeps the
    /// size still counts, and a `touch` alone does not reload.
    var digest: [UInt8]

    /// Reads `path` now.
    static func read(_ path: String) -> WatchedFile? {
        var info = stat()
        guard stat(path, &info) == 0, let data = FileBytes.read(path, statted: info) else { return nil }
        return WatchedFile(
            size: Int64(info.st_size),
            modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            inode: UInt64(info.st_ino),
            digest: SHA256Digest.hash([UInt8](data)))
    }
}

/// Decides, poll by poll, when the watched files have changed and settled.
/// A file rewritten in place is empty or half written for a moment; reading
/// it then would serve (or try to serve) a set nobody wrote. So a change is
/// applied only once two successive polls see every file exactly the same
/// (size, time, inode and content): the writer has finished.
struct SettledChange: Sendable {
    typealias Files = [String: WatchedFile?]

    enum Decision: Sendable, Equatable {
        /// The content is what was last applied.
        case unchanged
        /// Something changed and is still moving: look again at the next poll.
        case settling
        /// Changed and the same as at the previous poll: reload now.
        case reload
    }

    /// The files as they were when the serving set was loaded.
    private(set) var applied: Files
    private var previous: Files

    init(applied: Files) {
        self.applied = applied
        self.previous = applied
    }

    mutating func poll(_ current: Files) -> Decision {
        defer { previous = current }
        guard Self.contentDiffers(current, applied) else { return .unchanged }
        return current == previous ? .reload : .settling
    }

    /// After a reload of `decided` (the files the decision saw). `after` is a
    /// fresh look, for files the new set names that `decided` did not have (a
    /// new `policies` path); files both have keep their decided state, so an
    /// edit made while the reload ran is still seen as a change.
    mutating func reloaded(_ decided: Files, after: Files) {
        var next = after
        for (path, state) in decided where next[path] != nil {
            next[path] = state
        }
        applied = next
        previous = next
    }

    private static func contentDiffers(_ a: Files, _ b: Files) -> Bool {
        guard Set(a.keys) == Set(b.keys) else { return true }
        return a.contains { path, state in state?.digest != b[path]??.digest }
    }
}
