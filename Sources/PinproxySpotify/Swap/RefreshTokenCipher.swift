import COpenSSL
import Foundation

/// The refresh tokens the swap backend hands to apps (DESIGN §7, token swap):
/// never the raw value, always an encrypted, authenticated form.
///
/// Format, version 1: base64url (unpadded) of
/// `0x01 || nonce (12 random bytes) || ciphertext || tag (16 bytes)`,
/// AES-256-GCM with the version byte as additional authenticated data.
///
/// The legacy format (the reference swap service's, read-only): base64 (line
/// breaks allowed) of DES-EDE3-CBC, key and IV from `EVP_BytesToKey(MD5, no
/// salt, 2048 rounds)` of the shared secret. Accepted by `decrypt`, never written.
public struct RefreshTokenCipher: Sendable {
    public static let version: UInt8 = 1
    static let nonceLength = 12
    static let tagLength = 16

    private let key: [UInt8]
    private let legacySecret: [UInt8]?

    public enum KeyError: Error, Equatable, CustomStringConvertible {
        case notBase64
        case wrongLength(Int)

        public var description: String {
            switch self {
            case .notBase64: return "the swap key is not base64 (expected `openssl rand -base64 32`)"
            case .wrongLength(let count): return "the swap key is \(count) bytes; AES-256 needs 32 (`openssl rand -base64 32`)"
            }
        }
    }

    /// - Parameters:
    ///   - base64Key: base64 of 32 bytes (surrounding whitespace ignored).
    ///   - legacySecret: the reference service's secret, if its tokens are accepted.
    public init(base64Key: String, legacySecret: String? = nil) throws(KeyError) {
        guard let data = Data(base64Encoded: base64Key.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw .notBase64 }
        guard data.count == 32 else { throw .wrongLength(data.count) }
        self.key = Array(data)
        self.legacySecret = legacySecret.map { Array($0.utf8) }
    }

    /// The version-1 form of `token`, with a fresh random nonce.
    public func encrypt(_ token: String) -> String {
        var nonce = [UInt8](repeating: 0, count: Self.nonceLength)
        precondition(RAND_bytes(&nonce, Int32(nonce.count)) == 1, "RAND_bytes failed")
        let (ciphertext, tag) = Self.aesGCMSeal(key: key, nonce: nonce, aad: [Self.version], plaintext: Array(token.utf8))
        return Base64URL.encode([Self.version] + nonce + ciphertext + tag)
    }

    /// The raw refresh token, or nil when `sealed` is neither a version-1
    /// token made with this key nor (when configured) a legacy one.
    public func decrypt(_ sealed: String) -> String? {
        if let token = decryptVersion1(sealed) { return token }
        if let legacySecret, let token = Self.legacyDecrypt(sealed, secret: legacySecret) { return token }
        return nil
    }

    func decryptVersion1(_ sealed: String) -> String? {
        guard let bytes = Base64URL.decode(sealed), bytes.count > 1 + Self.nonceLength + Self.tagLength,
              bytes[0] == Self.version else { return nil }
        let nonce = Array(bytes[1...Self.nonceLength])
        let ciphertext = Array(bytes[(1 + Self.nonceLength)..<(bytes.count - Self.tagLength)])
        let tag = Array(bytes.suffix(Self.tagLength))
        guard let plaintext = Self.aesGCMOpen(key: key, nonce: nonce, aad: [Self.version], ciphertext: ciphertext, tag: tag) else { return nil }
        return String(validating: plaintext, as: UTF8.self)
    }

    // MARK: AES-256-GCM

    private static func aesGCMSeal(key: [UInt8], nonce: [UInt8], aad: [UInt8], plaintext: [UInt8]) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: tagLength)
        var ok = EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, nil, nil) == 1
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1
        ok = ok && EVP_EncryptInit_ex(ctx, nil, nil, key, nonce) == 1
        ok = ok && EVP_EncryptUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1
        ok = ok && EVP_EncryptUpdate(ctx, &ciphertext, &length, plaintext, Int32(plaintext.count)) == 1
        var total = Int(length)
        ok = ok && ciphertext.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx, $0.baseAddress! + total, &length) } == 1
        total += Int(length)
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1
        // Encryption with a valid 32-byte key cannot fail short of a broken library.
        precondition(ok, "AES-256-GCM encryption failed in OpenSSL")
        return (Array(ciphertext.prefix(total)), tag)
    }

    private static func aesGCMOpen(key: [UInt8], nonce: [UInt8], aad: [UInt8], ciphertext: [UInt8], tag: [UInt8]) -> [UInt8]? {
        let ctx = EVP_CIPHER_CTX_new()!
        defer {
            EVP_CIPHER_CTX_free(ctx)
            ERR_clear_error()
        }
        var length: Int32 = 0
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var tag = tag
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1,
              EVP_DecryptInit_ex(ctx, nil, nil, key, nonce) == 1,
              EVP_DecryptUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_DecryptUpdate(ctx, &plaintext, &length, ciphertext, Int32(ciphertext.count)) == 1 else { return nil }
        let total = Int(length)
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else { return nil }
        // The tag is checked here: a tampered byte anywhere ends in nil.
        let final = plaintext.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress! + total, &length) }
        guard final == 1 else { return nil }
        return Array(plaintext.prefix(total + Int(length)))
    }

    // MARK: Legacy DES-EDE3-CBC (read-only)

    /// The reference service's `pkcs5_keyivgen(secret)` decryption. Refresh
    /// tokens are printable ASCII: anything else is a wrong secret or
    /// garbage that happened to end in valid padding.
    static func legacyDecrypt(_ sealed: String, secret: [UInt8]) -> String? {
        guard let data = Data(base64Encoded: sealed, options: .ignoreUnknownCharacters), !data.isEmpty, data.count % 8 == 0 else { return nil }
        let cipher = EVP_des_ede3_cbc()
        var key = [UInt8](repeating: 0, count: Int(EVP_MAX_KEY_LENGTH))
        var iv = [UInt8](repeating: 0, count: Int(EVP_MAX_IV_LENGTH))
        guard EVP_BytesToKey(cipher, EVP_md5(), nil, secret, Int32(secret.count), 2048, &key, &iv) > 0 else { return nil }
        let ctx = EVP_CIPHER_CTX_new()!
        defer {
            EVP_CIPHER_CTX_free(ctx)
            ERR_clear_error()
        }
        let input = Array(data)
        var output = [UInt8](repeating: 0, count: input.count + 8)
        var length: Int32 = 0
        guard EVP_DecryptInit_ex(ctx, cipher, nil, key, iv) == 1,
              EVP_DecryptUpdate(ctx, &output, &length, input, Int32(input.count)) == 1 else { return nil }
        let total = Int(length)
        guard output.withUnsafeMutableBufferPointer({ EVP_DecryptFinal_ex(ctx, $0.baseAddress! + total, &length) }) == 1 else { return nil }
        let plaintext = output.prefix(total + Int(length))
        guard !plaintext.isEmpty, plaintext.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
        return String(decoding: plaintext, as: UTF8.self)
    }

    /// The legacy form of `token` (for tests: pinproxy never writes it).
    static func legacyEncrypt(_ token: String, secret: String) -> String? {
        let cipher = EVP_des_ede3_cbc()
        var key = [UInt8](repeating: 0, count: Int(EVP_MAX_KEY_LENGTH))
        var iv = [UInt8](repeating: 0, count: Int(EVP_MAX_IV_LENGTH))
        let secretBytes = Array(secret.utf8)
        guard EVP_BytesToKey(cipher, EVP_md5(), nil, secretBytes, Int32(secretBytes.count), 2048, &key, &iv) > 0 else { return nil }
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        let input = Array(token.utf8)
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var length: Int32 = 0
        guard EVP_EncryptInit_ex(ctx, cipher, nil, key, iv) == 1,
              EVP_EncryptUpdate(ctx, &output, &length, input, Int32(input.count)) == 1 else { return nil }
        let total = Int(length)
        guard output.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(ctx, $0.baseAddress! + total, &length) }) == 1 else { return nil }
        return Data(output.prefix(total + Int(length))).base64EncodedString(options: .lineLength64Characters) + "\n"
    }
}

/// RFC 4648 §5, unpadded.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> [UInt8]? {
        guard text.utf8.allSatisfy({ byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
        }) else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
