import Foundation

/// The CA's two files. A first start creates both, and a kill at any moment
/// of that must leave either no CA (the next start creates one) or a CA the
/// next start can use: never one file without the other. So both are written
/// in full to temporary files beside their final names (`KEY.new`,
/// `CERT.new`, fsynced, key 0600), then the key takes its name (never
/// replacing a file), then the certificate. The certificate's name appearing
/// is what makes the CA complete; a start that finds the key alone and a
/// complete `CERT.new` that belongs to it finishes that last rename.
extension CertificateAuthority {
    /// Loads the CA, refusing a key file that group or others can read, and
    /// a certificate, key or chain that cannot mint leaves clients accept.
    public static func load(certificatePath: String, keyPath: String, chainPath: String? = nil) throws -> CertificateAuthority {
        try SecretFilePermissions.requirePrivate(keyPath, what: "CA key")
        let certificates = try Certificate.loadPEM(file: certificatePath)
        let key = try PrivateKey(pemFile: keyPath)
        return try CertificateAuthority(certificate: certificates[0], key: key,
                                        chain: try loadChain(chainPath, above: certificates[0]))
    }

    /// The certificates of `ca.chain`, nearest first; a copy of the CA
    /// certificate itself at the top of the file (a bundle) is skipped.
    public static func loadChain(_ path: String?, above certificate: Certificate) throws -> [Certificate] {
        guard let path else { return [] }
        return Array(try Certificate.loadPEM(file: path).drop(while: { $0 == certificate }))
    }

    /// Loads the CA when both files exist, creates and writes it when both are
    /// missing (unless a chain is configured: a CA issued elsewhere is never
    /// made up), finishes a creation that was interrupted after the key took
    /// its name, and otherwise refuses, naming both files and what to do.
    public static func loadOrCreate(certificatePath: String, keyPath: String, chainPath: String? = nil) throws -> (CertificateAuthority, created: Bool) {
        let files = CAFiles(certificatePath: certificatePath, keyPath: keyPath)
        switch (files.exists(certificatePath), files.exists(keyPath)) {
        case (true, true):
            let ca = try load(certificatePath: certificatePath, keyPath: keyPath, chainPath: chainPath)
            files.removeTemporaries()
            return (ca, false)
        case (false, _) where chainPath != nil:
            throw TLSError.configuration(
                "CA certificate \(certificatePath) does not exist while ca.chain is set: install the certificate your "
                + "organisation's CA issued for the request `pinproxy ca csr` wrote, or remove ca.chain to have pinproxy create its own CA")
        case (false, false):
            files.removeTemporaries()
            let ca = try create()
            try ca.write(certificatePath: certificatePath, keyPath: keyPath)
            return (ca, true)
        case (false, true):
            guard let ca = try files.finishInterruptedCreation() else {
                throw TLSError.configuration(
                    "CA key \(keyPath) exists but its certificate \(certificatePath) does not (a first start that was stopped "
                    + "while creating the CA leaves this, and so does `pinproxy ca csr`). Install the certificate issued for "
                    + "that request (and set ca.chain), or, if no client was given this CA's certificate yet, remove \(keyPath) "
                    + "and start again to create a new CA; otherwise restore \(certificatePath) from a backup")
            }
            return (ca, true)
        case (true, false):
            throw TLSError.configuration(
                "CA certificate \(certificatePath) exists but its key \(keyPath) does not. Restore \(keyPath) from a backup, "
                + "or remove \(certificatePath) and start again to create a new CA (clients must then trust the new certificate)")
        }
    }

    /// Writes the key (0600, never replacing a file) and the certificate
    /// (0644), in the order that no interruption can turn into a half CA.
    public func write(certificatePath: String, keyPath: String) throws {
        try CAFiles(certificatePath: certificatePath, keyPath: keyPath).write(self, stopAfter: nil)
    }

    var keyPEM: [UInt8] { Array(key.pemString.utf8) }

    /// The key at `keyPath` for `pinproxy ca csr`, or a new P-256 key written
    /// there (mode 0600, never replacing a file) when there is none.
    public static func loadOrCreateKey(keyPath: String) throws -> (PrivateKey, created: Bool) {
        if FileManager.default.fileExists(atPath: keyPath) {
            try SecretFilePermissions.requirePrivate(keyPath, what: "CA key")
            return (try PrivateKey(pemFile: keyPath), false)
        }
        let key = try PrivateKey.generateP256()
        try SecureFileWriter.write(Array(key.pemString.utf8), to: keyPath, mode: 0o600, exclusive: true)
        return (key, true)
    }
}

/// The steps of writing the CA, and recovery from an interrupted write.
struct CAFiles {
    let certificatePath: String
    let keyPath: String
    var certificateTemporary: String { certificatePath + ".new" }
    var keyTemporary: String { keyPath + ".new" }

    /// Thrown by `write(_:stopAfter:)` in tests, standing in for a kill.
    struct Interrupted: Error {}

    static let stepCount = 5

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// `stopAfter`: tests stop after that many steps, as a kill would.
    func write(_ ca: CertificateAuthority, stopAfter: Int?) throws {
        var done = 0
        func step() throws {
            done += 1
            if done == stopAfter { throw Interrupted() }
        }
        // Temporaries left by an earlier interrupted attempt hold nothing of value.
        removeTemporaries()
        do {
            try SecureFileWriter.writeTemporary(ca.keyPEM, at: keyTemporary, mode: 0o600)
            try step()
            try SecureFileWriter.writeTemporary(Array(ca.certificate.pemString.utf8), at: certificateTemporary, mode: 0o644)
            SecureFileWriter.syncDirectory(of: certificateTemporary)
            SecureFileWriter.syncDirectory(of: keyTemporary)
            try step()
            try SecureFileWriter.linkNoReplace(keyTemporary, to: keyPath)
            try step()
            SecureFileWriter.syncDirectory(of: keyPath)
            try step()
        } catch let error as Interrupted {
            throw error
        } catch {
            // Nothing has its final name yet (or the key link failed): leave no trace.
            removeTemporaries()
            throw error
        }
        try SecureFileWriter.rename(certificateTemporary, to: certificatePath)
        try step()
        SecureFileWriter.syncDirectory(of: certificatePath)
    }

    /// The key has its name and the certificate does not: if a complete
    /// `CERT.new` of this very key is there, the previous start was stopped
    /// between the two renames; finish it. nil when that is not the case.
    func finishInterruptedCreation() throws -> CertificateAuthority? {
        guard exists(certificateTemporary),
              let candidate = try? CertificateAuthority.load(certificatePath: certificateTemporary, keyPath: keyPath) else {
            return nil
        }
        try SecureFileWriter.rename(certificateTemporary, to: certificatePath)
        SecureFileWriter.syncDirectory(of: certificatePath)
        return candidate
    }

    /// The `.new` names are pinproxy's own; a stale one (the key's holds a
    /// private key) is removed.
    func removeTemporaries() {
        unlink(keyTemporary)
        unlink(certificateTemporary)
    }
}
