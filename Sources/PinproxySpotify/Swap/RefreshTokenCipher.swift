import Foundation
@_spi(Testing) import PinproxyTLS

/// The refresh tokens the token swap hands to apps: never the raw value
/// (an app, or anything that reads its storage, would then hold a credential
/// that outlives every access token), always an encrypted, authenticated form.
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
    static let nonceLength = AES256GCM.nonceLength
    static let tagLength = AES256GCM.tagLength

    private let aead: AES256GCM
    private let legacy: LegacyDESEDE3?

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
        guard let key = Base64.decode(base64Key.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw .notBase64 }
        do {
            aead = try AES256GCM(key: key)
        } catch {
            throw .wrongLength(key.count)
        }
        // An OpenSSL without DES-EDE3 or MD5 opens no legacy token, as if none were configured.
        legacy = legacySecret.flatMap { try? LegacyDESEDE3(passphrase: Array($0.utf8)) }
    }

    /// The version-1 form of `token`, with a fresh random nonce.
    public func encrypt(_ token: String) -> String {
        let box = aead.seal(Array(token.utf8), authenticating: [Self.version])
        return Base64URL.encode([Self.version] + box.combined)
    }

    /// The raw refresh token, or nil when `sealed` is neither a version-1
    /// token made with this key nor (when configured) a legacy one.
    public func decrypt(_ sealed: String) -> String? {
        if let token = decryptVersion1(sealed) { return token }
        if let legacy, let token = Self.legacyDecrypt(sealed, with: legacy) { return token }
        return nil
    }

    func decryptVersion1(_ sealed: String) -> String? {
        // At least one byte of ciphertext: an empty refresh token is never issued.
        guard let bytes = Base64URL.decode(sealed), bytes.count > 1 + Self.nonceLength + Self.tagLength,
              bytes[0] == Self.version,
              let box = try? AES256GCM.SealedBox(combined: Array(bytes.dropFirst())),
              let plaintext = try? aead.open(box, authenticating: [Self.version]) else { return nil }
        return String(validating: plaintext, as: UTF8.self)
    }

    // MARK: Legacy format (read-only)

    /// The reference service's `pkcs5_keyivgen(secret)` decryption. Refresh
    /// tokens are printable ASCII: anything else is a wrong secret or
    /// garbage that happened to end in valid padding.
    static func legacyDecrypt(_ sealed: String, secret: [UInt8]) -> String? {
        guard let legacy = try? LegacyDESEDE3(passphrase: secret) else { return nil }
        return legacyDecrypt(sealed, with: legacy)
    }

    private static func legacyDecrypt(_ sealed: String, with legacy: LegacyDESEDE3) -> String? {
        // The reference service wrapped its base64 in lines.
        let base64 = String(sealed.unicodeScalars.filter { !CharacterSet.whitespacesAndNewlines.contains($0) })
        guard let ciphertext = Base64.decode(base64),
              let plaintext = try? legacy.decrypt(ciphertext),
              !plaintext.isEmpty, plaintext.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else { return nil }
        return String(decoding: plaintext, as: UTF8.self)
    }

    /// The legacy form of `token`, in 64-character lines (for tests: pinproxy never writes it).
    static func legacyEncrypt(_ token: String, secret: String) -> String? {
        guard let ciphertext = try? LegacyDESEDE3(passphrase: Array(secret.utf8)).encrypt(Array(token.utf8)) else { return nil }
        var text = Substring(Base64.encode(ciphertext))
        var lines: [Substring] = []
        while !text.isEmpty {
            lines.append(text.prefix(64))
            text = text.dropFirst(64)
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

