import Foundation

/// A file's text, "" when it is empty, missing or not UTF-8.
///
/// Test helpers read child processes' output files many times a second, and
/// most of them are empty (curl's stderr, a quiet server): on Linux,
/// `String(contentsOfFile:)` keeps a 4 KiB buffer for every empty file it
/// reads (Foundation's zero-size path), which LeakSanitizer reports in
/// the thousands. An empty file is answered without reading it.
public enum TextFile {
    public static func read(_ path: String) -> String {
        (try? readChecked(path)) ?? ""
    }

    /// A file's permission bits (`0o600`), nil when it cannot be stat'ed.
    public static func permissions(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    /// A file's text, "" when it is empty; like `String(contentsOfFile:)`, it
    /// throws when the file is missing or not UTF-8, for the checks that must
    /// fail then. (As with `read`, not for /proc files, which report size 0.)
    public static func readChecked(_ path: String) throws -> String {
        var info = stat()
        if stat(path, &info) == 0, info.st_size == 0 { return "" }
        return try String(contentsOfFile: path, encoding: .utf8)
    }
}
