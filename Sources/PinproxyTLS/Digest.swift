import COpenSSL

/// SHA-256 through OpenSSL's EVP interface (docs/contract.md §8: hashing is OpenSSL's).
public enum SHA256Digest {
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return Array(digest.prefix(32))
    }

    /// Base64 of the SHA-256 of `bytes`: the form pins are written in.
    public static func base64(_ bytes: [UInt8]) -> String {
        Base64.encode(hash(bytes))
    }
}
