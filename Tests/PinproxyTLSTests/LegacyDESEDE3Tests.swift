@_spi(Testing) import PinproxyTLS
import Testing

@Suite("Legacy DES-EDE3-CBC (read-only token format)")
struct LegacyDESEDE3Tests {
    /// The reference swap service sealed "test" with the secret "secret" as this.
    static let reference = Base64.decode("oTxJd67ElLY=")!

    @Test func theReferenceVectorDecrypts() throws {
        let legacy = try LegacyDESEDE3(passphrase: Array("secret".utf8))
        #expect(try legacy.decrypt(Self.reference) == Array("test".utf8))
        #expect(try legacy.encrypt(Array("test".utf8)) == Self.reference)
    }

    @Test func longerPlaintextsRoundTrip() throws {
        let legacy = try LegacyDESEDE3(passphrase: Array("s3cr3t".utf8))
        for length in [0, 1, 7, 8, 9, 135] {
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37) }
            let ciphertext = try legacy.encrypt(plaintext)
            #expect(ciphertext.count == (length / 8 + 1) * 8, "PKCS#7 padding always adds a block's worth or less")
            #expect(try legacy.decrypt(ciphertext) == plaintext)
        }
    }

    @Test func ciphertextsThatAreNotWholeBlocksAreRefused() throws {
        let legacy = try LegacyDESEDE3(passphrase: Array("secret".utf8))
        #expect(throws: LegacyDESEDE3Error.invalidLength(0)) { try legacy.decrypt([]) }
        #expect(throws: LegacyDESEDE3Error.invalidLength(7)) { try legacy.decrypt(Array(Self.reference.prefix(7))) }
        #expect(throws: LegacyDESEDE3Error.invalidLength(9)) { try legacy.decrypt(Self.reference + [0]) }
    }

    @Test func anotherPassphraseFailsThePaddingCheck() throws {
        let other = try LegacyDESEDE3(passphrase: Array("other".utf8))
        #expect(throws: LegacyDESEDE3Error.badPadding) { try other.decrypt(Self.reference) }
    }

    @Test func theKeyNeverShowsInDescriptions() throws {
        let legacy = try LegacyDESEDE3(passphrase: Array("secret".utf8))
        var dumped = ""
        dump(legacy, to: &dumped)
        for text in [String(describing: legacy), String(reflecting: legacy), dumped] {
            #expect(text.contains("<redacted>") || !text.contains("["), "\(text)")
            #expect(!text.contains(","), "no byte lists: \(text)")
        }
    }
}
