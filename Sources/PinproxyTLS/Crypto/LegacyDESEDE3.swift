import COpenSSL

/// Triple DES in CBC mode with the key and IV derived from a passphrase the
/// way OpenSSL's `EVP_BytesToKey(MD5, no salt, 2048 rounds)` does: the
/// format of refresh tokens sealed by the reference token-swap service
/// (Ruby's `pkcs5_keyivgen`).
///
/// Read-only on purpose: pinproxy opens these tokens so apps that hold them
/// keep working, and never makes new ones. `encrypt` exists for tests only.
public struct LegacyDESEDE3: Sendable {
    private static let rounds: Int32 = 2048
    private let key: [UInt8]
    private let iv: [UInt8]

    public init(passphrase: [UInt8]) throws(LegacyDESEDE3Error) {
        var key = [UInt8](repeating: 0, count: Int(EVP_MAX_KEY_LENGTH))
        var iv = [UInt8](repeating: 0, count: Int(EVP_MAX_IV_LENGTH))
        OpenSSLErrorQueue.clear()
        defer { OpenSSLErrorQueue.clear() }
        guard let cipher = EVP_des_ede3_cbc(), let md5 = EVP_md5(),
              EVP_BytesToKey(cipher, md5, nil, passphrase, Int32(passphrase.count), Self.rounds, &key, &iv) > 0 else {
            throw .unsupported
        }
        self.key = Array(key.prefix(Int(EVP_CIPHER_get_key_length(cipher))))
        self.iv = Array(iv.prefix(Int(EVP_CIPHER_get_iv_length(cipher))))
    }

    /// The plaintext, when the padding checks out. A wrong passphrase is
    /// caught only by that check, so it is not proof of the right one:
    /// callers check the plaintext's shape too.
    public func decrypt(_ ciphertext: [UInt8]) throws(LegacyDESEDE3Error) -> [UInt8] {
        guard !ciphertext.isEmpty, ciphertext.count % 8 == 0 else { throw .invalidLength(ciphertext.count) }
        let context = CipherContext(EVP_des_ede3_cbc(), encrypting: false)
        guard context.started, context.setKey(key, iv: iv), let body = context.update(ciphertext) else { throw .unsupported }
        guard let last = context.finish() else { throw .badPadding }
        return body + last
    }

    @_spi(Testing)
    public func encrypt(_ plaintext: [UInt8]) throws(LegacyDESEDE3Error) -> [UInt8] {
        let context = CipherContext(EVP_des_ede3_cbc(), encrypting: true)
        guard context.started, context.setKey(key, iv: iv), let body = context.update(plaintext),
              let last = context.finish() else { throw .unsupported }
        return body + last
    }
}

/// The key and IV are secrets: they never show in a description, a debug print or a dump.
extension LegacyDESEDE3: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "LegacyDESEDE3(key: <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// Why a legacy token did not open. No case carries key or data bytes.
public enum LegacyDESEDE3Error: Error, Equatable, Sendable, CustomStringConvertible {
    /// Empty, or not whole 8-byte blocks.
    case invalidLength(Int)
    /// The last block's padding is wrong: another passphrase, or not such a token.
    case badPadding
    /// This OpenSSL will not do DES-EDE3-CBC or MD5 (a FIPS-only provider, say).
    case unsupported

    public var description: String {
        switch self {
        case .invalidLength(let count): return "a DES-EDE3-CBC ciphertext is whole 8-byte blocks, not \(count) bytes"
        case .badPadding: return "DES-EDE3-CBC padding check failed"
        case .unsupported: return "this OpenSSL does not provide DES-EDE3-CBC with MD5 key derivation"
        }
    }
}
