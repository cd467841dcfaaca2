import Foundation

/// Every client connection, upstream connection and policy file costs a file
/// descriptor, and distributions start services with a soft limit (often
/// 1,024) far below the hard one. `run` raises the soft limit to the hard
/// limit at start, as nginx's `worker_rlimit_nofile` or Envoy's guidance do.
enum OpenFilesLimit {
    struct Change {
        var before: UInt64
        var after: UInt64
        var hard: UInt64
        /// Why the soft limit could not be raised, if it could not.
        var failure: String?
    }

    static func raiseSoftToHard() -> Change? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let before = UInt64(limit.rlim_cur)
        var target = limit.rlim_max
        if target == rlim_t.max {  // RLIM_INFINITY
            // The kernel refuses an infinite descriptor limit; its ceiling is fs.nr_open.
            let text = (try? String(contentsOfFile: "/proc/sys/fs/nr_open", encoding: .utf8)) ?? ""
            target = rlim_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? limit.rlim_cur
        }
        guard target > limit.rlim_cur else {
            return Change(before: before, after: before, hard: UInt64(limit.rlim_max), failure: nil)
        }
        var raised = limit
        raised.rlim_cur = target
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 else {
            return Change(before: before, after: before, hard: UInt64(limit.rlim_max), failure: String(cString: strerror(errno)))
        }
        return Change(before: before, after: UInt64(target), hard: UInt64(limit.rlim_max), failure: nil)
    }
}
