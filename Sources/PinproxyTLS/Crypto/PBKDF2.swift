import COpenSSL

/// PBKDF2 with HMAC-SHA-256 (RFC 8018 §5.2), OpenSSL's `PKCS5_PBKDF2_HMAC`:
/// what `pinproxy passwd` hashes client passwords with and what the proxy
/// verifies `Proxy-Authorization` against (docs/contract.md §15).
public enum PBKDF2SHA256 {
    /// The derived key for `password` and `salt` after `iterations` rounds.
    /// Traps only on a broken library or lengths no caller passes (the
    /// config loader bounds iterations and lengths before anything gets here).
    public static func derive(password: [UInt8], salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
        precondition(iterations >= 1 && iterations <= Int(Int32.max), "PBKDF2: iterations out of range: \(iterations)")
        precondition(length >= 1 && length <= 1024, "PBKDF2: key length out of range: \(length)")
        var key = [UInt8](repeating: 0, count: length)
        let passChars = password.map { CChar(bitPattern: $0) }
        let ok = passChars.withUnsafeBufferPointer { pass in
            salt.withUnsafeBufferPointer { saltBytes in
                key.withUnsafeMutableBufferPointer { out in
                    PKCS5_PBKDF2_HMAC(pass.baseAddress, Int32(pass.count), saltBytes.baseAddress, Int32(saltBytes.count),
                                      Int32(iterations), EVP_sha256(), Int32(length), out.baseAddress)
                }
            }
        }
        precondition(ok == 1, "PKCS5_PBKDF2_HMAC(SHA-256) failed")
        return key
    }
}

/// Comparison whose time depends on the length only, never on where the
/// first difference lies (OpenSSL's `CRYPTO_memcmp`): a password check must
/// not tell an attacker how many leading bytes of a guess were right.
public enum ConstantTime {
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        // The lengths are public (the hash format fixes them); only the bytes are secret.
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
        }
    }
}
