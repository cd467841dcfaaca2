import COpenSSL

/// Bytes from OpenSSL's CSPRNG: nonces, PKCE verifiers, login `state`s.
///
/// Like the standard library's `SystemRandomNumberGenerator`, it traps rather
/// than throws: a generator that cannot produce means the process cannot make
/// a secret safely, and no caller has a better answer than stopping.
public enum SecureRandom {
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes: negative count \(count)")
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        let ok = bytes.withUnsafeMutableBytes { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "RAND_bytes failed: OpenSSL's random generator is not seeded")
        return bytes
    }
}
