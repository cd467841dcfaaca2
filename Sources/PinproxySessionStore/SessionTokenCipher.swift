import PinproxyPolicy
import PinproxyTLS

/// How a token sits in the store (docs/contract.md §12): never in clear.
///
/// Format, version 1: `0x01 || nonce (12 random bytes) || ciphertext || tag (16 bytes)`,
/// AES-256-GCM under `key_file`. The additional data binds the version, the
/// session and the column (`access` or `refresh`), so a sealed value copied
/// to another session's row, or from one column to the other, does not open.
public struct SessionTokenCipher: Sendable {
    public static let version: UInt8 = 1

    public enum Field: String, Sendable {
        case access
        case refresh
    }

    public enum OpenError: Error, Equatable, CustomStringConvertible {
        case tooShort
        case unknownVersion(UInt8)
        /// Wrong key, another session's or column's value, or tampered bytes.
        case notAuthentic

        public var description: String {
            switch self {
            case .tooShort: return "a stored token is shorter than any sealed value"
            case .unknownVersion(let version): return "a stored token has format version \(version); this pinproxy reads version \(SessionTokenCipher.version)"
            case .notAuthentic: return "a stored token does not open with key_file (another key, or altered in the database)"
            }
        }
    }

    private let aead: AES256GCM

    /// - Parameter base64Key: base64 of 32 bytes (trailing white space ignored).
    public init(base64Key: Secret) throws {
        var text = base64Key.reveal()
        while let last = text.last, last.isWhitespace { text.removeLast() }
        guard let key = Base64.decode(text) else { throw AES256GCMError.invalidKeyLength(0) }
        aead = try AES256GCM(key: key)
    }

    public func seal(_ token: Secret, session: String, field: Field) -> [UInt8] {
        let box = aead.seal(Array(token.reveal().utf8), authenticating: Self.additionalData(session: session, field: field))
        return [Self.version] + box.combined
    }

    public func open(_ sealed: [UInt8], session: String, field: Field) throws(OpenError) -> Secret {
        guard sealed.count > 1 + AES256GCM.nonceLength + AES256GCM.tagLength else { throw .tooShort }
        guard sealed[0] == Self.version else { throw .unknownVersion(sealed[0]) }
        guard let box = try? AES256GCM.SealedBox(combined: Array(sealed.dropFirst())),
              let plaintext = try? aead.open(box, authenticating: Self.additionalData(session: session, field: field)),
              let text = String(validating: plaintext, as: UTF8.self) else { throw .notAuthentic }
        return Secret(text)
    }

    static func additionalData(session: String, field: Field) -> [UInt8] {
        [version] + Array("pinproxy-session-store/\(field.rawValue)/\(session)".utf8)
    }
}
