import Foundation

/// Relative paths resolve against the directory of the file that names them
/// (docs/contract.md §3), so a config tree can be moved or mounted anywhere whole.
public enum PathResolution {
    public static func resolve(_ path: String, against directory: String) -> String {
        if path.hasPrefix("/") { return standardize(path) }
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        return standardize(base + path)
    }

    /// The directory holding `file`, absolute.
    public static func directory(of file: String, workingDirectory: String) -> String {
        let absolute = resolve(file, against: workingDirectory)
        return (absolute as NSString).deletingLastPathComponent
    }

    /// `a/b/../c` → `a/c`, without touching the file system (no symlink resolution).
    static func standardize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }
}
