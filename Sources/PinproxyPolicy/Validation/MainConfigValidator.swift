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
            bag.error(config.sourceMap[missing], "\(path) is missing while \(present) exists: restore it, or remove both to create a new CA")
        }
        if keyExists, let attributes = try? fm.attributesOfItem(atPath: config.ca.keyPath),
           let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            bag.error(config.sourceMap["ca.key"], "CA key \(config.ca.keyPath) is readable by group or others (mode \(String(mode, radix: 8))): chmod 600 it")
        }
    }
}
