import Foundation

/// Checks on the main file that look at the file system: the interception
/// CA's files (docs/contract.md §3: created when both are missing; the key must not be
/// group- or world-readable). `run` would refuse the same, so `check` says so first.
struct MainConfigValidator {
    let config: PinproxyConfig

    func validate(into bag: DiagnosticBag) {
        let fm = FileManager.default
        let certExists = fm.fileExists(atPath: config.ca.certificatePath)
        let keyExists = fm.fileExists(atPath: config.ca.keyPath)
        if certExists != keyExists {
            let (missing, present) = certExists ? ("ca.key", config.ca.certificatePath) : ("ca.cert", config.ca.keyPath)
            let path = certExists ? config.ca.keyPath : config.ca.certificatePath
            // `pinproxy ca csr` leaves the key without its certificate until the organisation's CA issues one.
            let install = certExists ? "" : " (or install the certificate issued for `pinproxy ca csr`'s request)"
            bag.error(config.sourceMap[missing], "\(path) is missing while \(present) exists: restore it\(install), or remove both to create a new CA")
        }
        if keyExists, let attributes = try? fm.attributesOfItem(atPath: config.ca.keyPath),
           let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            bag.error(config.sourceMap["ca.key"], "CA key \(config.ca.keyPath) is readable by group or others (mode \(String(mode, radix: 8))): chmod 600 it")
        }
        // A key that exists but cannot be read (a reload after it was replaced
        // or its mount went away) would only fail at the next start: said now,
        // the reload fails and the CA in memory keeps serving (docs/contract.md §14).
        if keyExists, let problem = Self.unreadable(config.ca.keyPath) {
            bag.error(config.sourceMap["ca.key"], "CA key \(config.ca.keyPath) cannot be read (\(problem)): restore it; the next start would fail")
        }
        CAFilesValidator(config: config).validate(into: bag)
    }

    /// Why `path` cannot be read as a regular file, or nil if it can.
    static func unreadable(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return String(cString: strerror(errno)) }
        guard info.st_mode & S_IFMT == S_IFREG else { return "not a regular file" }
        var byte: UInt8 = 0
        guard read(fd, &byte, 1) >= 0 else { return String(cString: strerror(errno)) }
        return nil
    }
}
