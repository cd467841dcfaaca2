import Foundation

/// A tmpfs of a few kilobytes mounted on a test's directory, to make a disk
/// full or read-only for real (root ignores file modes, so `chmod` cannot make
/// a read-only disk for a test that runs as root). Needs mount(8) and
/// CAP_SYS_ADMIN; `available` says whether this machine allows it.
public final class SmallTmpfs: @unchecked Sendable {
    public let path: String
    private var mounted = true

    public static let available: Bool = {
        guard geteuid() == 0 else { return false }
        let probe = NSTemporaryDirectory() + "pinproxy-tmpfs-probe-\(getpid())"
        try? FileManager.default.createDirectory(atPath: probe, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: probe) }
        guard run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", probe]) == 0 else { return false }
        return run(["umount", probe]) == 0
    }()

    public init(at path: String, kilobytes: Int) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard Self.run(["mount", "-t", "tmpfs", "-o", "size=\(kilobytes)k,mode=0700", "tmpfs", path]) == 0 else {
            throw TestSupportError("cannot mount a tmpfs on \(path)")
        }
    }

    deinit { unmount() }

    /// Writes a filler file until the disk refuses more (ENOSPC).
    public func fill() throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path + "/filler").creatingIfMissing())
        defer { try? handle.close() }
        let block = Data(repeating: 0, count: 4096)
        while (try? handle.write(contentsOf: block)) != nil {}
    }

    /// Remounts it read-only.
    public func makeReadOnly() throws {
        guard Self.run(["mount", "-o", "remount,ro", path]) == 0 else { throw TestSupportError("cannot remount \(path) read-only") }
    }

    public func unmount() {
        guard mounted else { return }
        mounted = false
        _ = Self.run(["umount", "-l", path])
    }

    @discardableResult
    static func run(_ command: [String]) -> Int32 {
        // Spawned and reaped like every child of the suite (ChildProcess).
        (try? ChildProcess.run(command[0], Array(command.dropFirst())))?.status ?? -1
    }
}

private extension URL {
    func creatingIfMissing() -> URL {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        return self
    }
}
