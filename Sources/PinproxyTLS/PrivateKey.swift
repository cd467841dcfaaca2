import COpenSSL
import Foundation

/// An owned `EVP_PKEY`. Immutable once made, so it may be shared across threads.
public final class PrivateKey: @unchecked Sendable, Hashable {
    let ref: OpaquePointer

    init(takingOwnershipOf ref: OpaquePointer) {
        self.ref = ref
    }

    deinit {
        EVP_PKEY_free(ref)
    }

    /// A fresh ECDSA P-256 key: the CA's and the process-wide leaf key.
    public static func generateP256() throws -> PrivateKey {
        OpenSSLErrorQueue.clear()
        guard let key = CPinproxy_EVP_EC_gen("P-256") else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "P-256 key generation failed"))
        }
        return PrivateKey(takingOwnershipOf: key)
    }

    /// Parses a PEM private key (PKCS#8, or traditional EC/RSA).
    public convenience init(pemBytes: [UInt8]) throws {
        let key: OpaquePointer = try MemoryBIO.withReadOnly(pemBytes) { bio in
            OpenSSLErrorQueue.clear()
            guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
                throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "no private key in PEM data"))
            }
            return key
        }
        self.init(takingOwnershipOf: key)
    }

    public convenience init(pemFile path: String) throws {
        try self.init(pemBytes: try FileBytes.read(path))
    }

    /// PKCS#8 PEM, unencrypted: callers write it with mode 0600.
    public var pemString: String {
        let bytes = (try? MemoryBIO.collect { PEM_write_bio_PrivateKey($0, self.ref, nil, nil, 0, nil, nil) }) ?? []
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The DER SubjectPublicKeyInfo of the public half.
    public var publicKeySPKI: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(ref, &out)
        guard length > 0, let out else { return [] }
        defer { CPinproxy_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    public static func == (lhs: PrivateKey, rhs: PrivateKey) -> Bool {
        lhs === rhs || lhs.publicKeySPKI == rhs.publicKeySPKI
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(publicKeySPKI)
    }
}

/// Reads small whole files (PEM, secrets) with an error that names the file.
enum FileBytes {
    static func read(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file"
            throw TLSError.configuration("cannot read \(path): \(reason)")
        }
        return [UInt8](data)
    }
}
