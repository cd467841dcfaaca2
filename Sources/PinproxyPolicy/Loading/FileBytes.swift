import Foundation

/// A configuration file's bytes, for everything in this module that reads one.
///
/// An empty regular file is answered without Foundation: on Linux,
/// `FileManager.contents(atPath:)` reads a file that stats as empty in 4 KiB
/// chunks (files under /proc report size 0 and still have content), and when
/// nothing was read it returns empty `Data` without freeing its first chunk.
/// The policy watcher reads every watched file every second, so one empty
/// file in the policy directory cost 4 KiB a second, for ever (found by
/// LeakSanitizer; see docs/fuzzing.md).
enum FileBytes {
    /// The file's content; nil when it is missing or unreadable.
    static func read(_ path: String) -> Data? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return read(path, statted: info)
    }

    /// The same, for a caller that has just called `stat` on `path` itself.
    static func read(_ path: String, statted info: stat) -> Data? {
        if info.st_size == 0, info.st_mode & S_IFMT == S_IFREG {
            // Readable? The same answer `contents(atPath:)` would give.
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
            close(descriptor)
            return Data()
        }
        return FileManager.default.contents(atPath: path)
    }
}
