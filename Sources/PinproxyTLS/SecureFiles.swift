import Foundation

/// Refuses secret files that others can read (DESIGN §3: the CA key).
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

/// Writes files that must be complete and private when they appear: a temp
/// file with the final mode, fsync, then rename (or, with `exclusive`, a new
/// file that never replaces an existing one).
public enum SecureFileWriter {
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t, exclusive: Bool) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let target = exclusive ? path : path + ".tmp.\(getpid())"
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC
        let fd = open(target, flags, mode)
        guard fd >= 0 else {
            throw TLSError.configuration("cannot create \(target): \(String(cString: strerror(errno)))")
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
            unlink(target)
            throw TLSError.configuration("cannot write \(target): \(String(cString: strerror(savedErrno)))")
        }
        if !exclusive {
            guard rename(target, path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(target)
                throw TLSError.configuration("cannot move \(target) to \(path): \(reason)")
            }
        }
    }
}
