import COpenSSL

/// AES-256 in Galois/Counter Mode (NIST SP 800-38D): a 32-byte key, 96-bit
/// nonces, 128-bit tags. What the token swap seals refresh tokens with.
///
/// Sealing cannot fail once the key and nonce have their lengths (those are
/// checked when the values are made), so `seal` does not throw; opening
/// fails with `authenticationFailed` when any byte of the box, or the
/// authenticated data, is not what was sealed.
public struct AES256GCM: Sendable {
    public static let keyLength = 32
    public static let nonceLength = 12
    public static let tagLength = 16

    private let key: [UInt8]

    public init(key: [UInt8]) throws(AES256GCMError) {
        guard key.count == Self.keyLength else { throw .invalidKeyLength(key.count) }
        self.key = key
    }

    /// `plaintext` sealed under `nonce`, authenticating `aad` too.
    ///
    /// A nonce must never be used twice with one key (GCM then leaks the
    /// authentication key): leave it to the default, a fresh random one,
    /// except in known-answer tests.
    public func seal(_ plaintext: [UInt8], nonce: Nonce = Nonce(), authenticating aad: [UInt8] = []) -> SealedBox {
        let context = start(encrypting: true, nonce: nonce)
        guard context.authenticate(aad), let body = context.update(plaintext), let last = context.finish(),
              let tag = context.tag(length: Self.tagLength), body.count + last.count == plaintext.count else {
            // Lengths are checked by the types: only a broken library gets here.
            preconditionFailure("AES-256-GCM encryption failed in OpenSSL")
        }
        return SealedBox(checkedNonce: nonce, ciphertext: body + last, tag: tag)
    }

    /// The plaintext of `box`, if it was sealed with this key and `aad`.
    public func open(_ box: SealedBox, authenticating aad: [UInt8] = []) throws(AES256GCMError) -> [UInt8] {
        let context = start(encrypting: false, nonce: box.nonce)
        guard context.authenticate(aad), let body = context.update(box.ciphertext), context.expectTag(box.tag) else {
            preconditionFailure("AES-256-GCM decryption failed in OpenSSL before the tag check")
        }
        // The tag is checked here: a changed byte anywhere ends in a failure.
        guard let last = context.finish() else { throw .authenticationFailed }
        return body + last
    }

    private func start(encrypting: Bool, nonce: Nonce) -> CipherContext {
        let context = CipherContext(EVP_aes_256_gcm(), encrypting: encrypting)
        guard context.started, context.setIVLength(Self.nonceLength), context.setKey(key, iv: nonce.bytes) else {
            preconditionFailure("OpenSSL refused AES-256-GCM with a \(Self.keyLength)-byte key and a \(Self.nonceLength)-byte nonce")
        }
        return context
    }
}

extension AES256GCM {
    /// 96 bits, the length GCM is specified for.
    public struct Nonce: Sendable, Equatable {
        public let bytes: [UInt8]

        /// A fresh random nonce.
        public init() {
            bytes = SecureRandom.bytes(AES256GCM.nonceLength)
        }

        public init(_ bytes: [UInt8]) throws(AES256GCMError) {
            guard bytes.count == AES256GCM.nonceLength else { throw .invalidNonceLength(bytes.count) }
            self.bytes = bytes
        }
    }

    /// What `seal` produces: the nonce travels with the ciphertext and tag.
    public struct SealedBox: Sendable, Equatable {
        public let nonce: Nonce
        public let ciphertext: [UInt8]
        public let tag: [UInt8]

        public init(nonce: Nonce, ciphertext: [UInt8], tag: [UInt8]) throws(AES256GCMError) {
            guard tag.count == AES256GCM.tagLength else { throw .invalidTagLength(tag.count) }
            self.init(checkedNonce: nonce, ciphertext: ciphertext, tag: tag)
        }

        /// Splits `nonce || ciphertext || tag`.
        public init(combined: [UInt8]) throws(AES256GCMError) {
            let overhead = AES256GCM.nonceLength + AES256GCM.tagLength
            guard combined.count >= overhead else { throw .sealedBoxTooShort(combined.count) }
            let nonceEnd = AES256GCM.nonceLength
            let tagStart = combined.count - AES256GCM.tagLength
            self.init(checkedNonce: try Nonce(Array(combined[..<nonceEnd])),
                      ciphertext: Array(combined[nonceEnd..<tagStart]),
                      tag: Array(combined[tagStart...]))
        }

        fileprivate init(checkedNonce: Nonce, ciphertext: [UInt8], tag: [UInt8]) {
            self.nonce = checkedNonce
            self.ciphertext = ciphertext
            self.tag = tag
        }

        /// `nonce || ciphertext || tag`.
        public var combined: [UInt8] {
            nonce.bytes + ciphertext + tag
        }
    }
}

/// The key is a secret: it never shows in a description, a debug print or a dump.
extension AES256GCM: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "AES256GCM(key: <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

/// Why AES-256-GCM refused. No case carries key, nonce or data bytes.
public enum AES256GCMError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidKeyLength(Int)
    case invalidNonceLength(Int)
    case invalidTagLength(Int)
    /// Fewer bytes than a nonce and a tag.
    case sealedBoxTooShort(Int)
    /// The tag does not match: another key, other authenticated data, or a changed byte.
    case authenticationFailed

    public var description: String {
        switch self {
        case .invalidKeyLength(let count): return "AES-256-GCM needs a 32-byte key, not \(count) bytes"
        case .invalidNonceLength(let count): return "AES-256-GCM needs a 12-byte nonce, not \(count) bytes"
        case .invalidTagLength(let count): return "AES-256-GCM needs a 16-byte tag, not \(count) bytes"
        case .sealedBoxTooShort(let count): return "an AES-256-GCM box is at least 28 bytes, not \(count)"
        case .authenticationFailed: return "AES-256-GCM authentication failed"
        }
    }
}
