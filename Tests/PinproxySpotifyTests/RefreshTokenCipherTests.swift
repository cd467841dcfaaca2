import Foundation
import Testing
@testable import PinproxySpotify

@Suite("Refresh-token cipher (token swap)")
struct RefreshTokenCipherTests {
    static let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()

    @Test func aSealedTokenOpensAndIsNotTheRawValue() throws {
        let cipher = try RefreshTokenCipher(base64Key: Self.key)
        let sealed = cipher.encrypt("AQD-raw-refresh-token")
        #expect(!sealed.contains("raw-refresh"))
        #expect(!sealed.contains("=") && !sealed.contains("+") && !sealed.contains("/"), "base64url, unpadded")
        #expect(cipher.decrypt(sealed) == "AQD-raw-refresh-token")
        #expect(cipher.encrypt("AQD-raw-refresh-token") != sealed, "a random nonce each time")
    }

    @Test func theFormatIsVersionNonceCiphertextTag() throws {
        let cipher = try RefreshTokenCipher(base64Key: Self.key)
        let bytes = try #require(Base64URL.decode(cipher.encrypt("abcd")))
        #expect(bytes.first == 1)
        #expect(bytes.count == 1 + 12 + 4 + 16)
    }

    @Test func everyTamperedByteIsRefused() throws {
        let cipher = try RefreshTokenCipher(base64Key: Self.key, legacySecret: "secret")
        let bytes = try #require(Base64URL.decode(cipher.encrypt("token-value")))
        for index in bytes.indices {
            var tampered = bytes
            tampered[index] ^= 0x01
            #expect(cipher.decrypt(Base64URL.encode(tampered)) == nil, "byte \(index)")
        }
        #expect(cipher.decrypt(Base64URL.encode(Array(bytes.dropLast()))) == nil)
        #expect(cipher.decrypt("") == nil)
        #expect(cipher.decrypt("not a token") == nil)
    }

    @Test func anotherKeyCannotOpenIt() throws {
        let sealed = try RefreshTokenCipher(base64Key: Self.key).encrypt("token-value")
        let other = try RefreshTokenCipher(base64Key: Data(repeating: 7, count: 32).base64EncodedString())
        #expect(other.decrypt(sealed) == nil)
    }

    @Test func badKeysAreRefusedWithAReason() {
        #expect(throws: RefreshTokenCipher.KeyError.notBase64) { try RefreshTokenCipher(base64Key: "***") }
        #expect(throws: RefreshTokenCipher.KeyError.wrongLength(16)) {
            try RefreshTokenCipher(base64Key: Data(repeating: 1, count: 16).base64EncodedString())
        }
    }

    @Test func theLegacyReferenceVectorDecrypts() throws {
        // The reference swap service: "test" encrypted with the secret "secret".
        #expect(RefreshTokenCipher.legacyDecrypt("oTxJd67ElLY=\n", secret: Array("secret".utf8)) == "test")
        #expect(RefreshTokenCipher.legacyEncrypt("test", secret: "secret") == "oTxJd67ElLY=\n")
        let cipher = try RefreshTokenCipher(base64Key: Self.key, legacySecret: "secret")
        #expect(cipher.decrypt("oTxJd67ElLY=\n") == "test")
    }

    @Test func legacyTokensWithLineBreaksDecryptOnlyWhenConfigured() throws {
        let token = String(repeating: "AQBcdEfGh-ij_KL", count: 9)
        let sealed = try #require(RefreshTokenCipher.legacyEncrypt(token, secret: "s3cr3t"))
        #expect(sealed.dropLast().contains("\n"), "long enough to wrap")
        #expect(try RefreshTokenCipher(base64Key: Self.key, legacySecret: "s3cr3t").decrypt(sealed) == token)
        #expect(try RefreshTokenCipher(base64Key: Self.key, legacySecret: "other").decrypt(sealed) == nil)
        #expect(try RefreshTokenCipher(base64Key: Self.key).decrypt(sealed) == nil)
    }
}
