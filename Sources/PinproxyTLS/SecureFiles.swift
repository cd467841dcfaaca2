import Foundation

/// Refuses secret files that others can read (the CA key).
public enum SecretFilePermissions {
    public static func requirePrivate(_ path: String, what: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw TLSError.configuration("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
        }
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            throw TLSError.configuration(
                "\(what) \(path) is readable by group or others (mode \(String(mode, radix: 8))); run: chmod 600 \(path)")
        }
    }
}

/// Writes files that must be complete and private when they appear under
/// their name: the bytes go to a temporary file with the final mode, are
/// fsynced, and only then take the final name (a rename, or with
/// `exclusive` a link that never replaces an existing file).
public enum SecureFileWriter {
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t, exclusive: Bool) throws {
        let temporary = path + ".tmp.\(getpid())"
        try writeTemporary(bytes, at: temporary, mode: mode)
        do {
            if exclusive {
                try linkNoReplace(temporary, to: path)
            } else {
                try rename(temporary, to: path)
            }
        } catch {
            unlink(temporary)
            throw error
        }
        syncDirectory(of: path)
    }

    /// Creates `path` (which must not exist) with `mode`, writes and fsyncs it.
    /// On failure nothing is left at `path`.
    static func writeTemporary(_ bytes: [UInt8], at path: String, mode: mode_t) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw TLSError.configuration("cannot create directory \(directory): \(error.localizedDescription)")
            }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw TLSError.configuration("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var ok = fchmod(fd, mode) == 0  // the umask may have narrowed or widened nothing; be exact
        ok = ok && bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
        ok = ok && fsync(fd) == 0
        let savedErrno = errno
        close(fd)
        guard ok else {
            unlink(path)
            throw TLSError.configuration("cannot write \(path): \(String(cString: strerror(savedErrno)))")
        }
    }

    /// Gives `temporary` the name `path` only if nothing has it (a link, so a
    /// file already there is never replaced), then drops the temporary name.
    static func linkNoReplace(_ temporary: String, to path: String) throws {
        if link(temporary, path) != 0 {
            let reason = errno
            // File systems without hard links: a rename guarded by a check.
            guard reason != EEXIST, !FileManager.default.fileExists(atPath: path) else {
                throw TLSError.configuration("\(path) already exists; it is never replaced")
            }
            try rename(temporary, to: path)
            return
        }
        unlink(temporary)
    }

    static func rename(_ temporary: String, to path: String) throws {
        guard Glibc.rename(temporary, path) == 0 else {
            throw TLSError.configuration("cannot move \(temporary) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Makes the renames in `path`'s directory durable (best effort: some
    /// file systems refuse fsync on a directory).
    static func syncDirectory(of path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
