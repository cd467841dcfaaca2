import PinproxyTLS
import Testing

@Suite("AES-256-GCM")
struct AES256GCMTests {
    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var digits = text.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)!)
        }
        return bytes
    }

    struct Vector: Sendable, CustomTestStringConvertible {
        var name: String
        var key: String
        var nonce: String
        var aad: String
        var plaintext: String
        var ciphertext: String
        var tag: String
        var testDescription: String { name }
    }

    /// McGrew and Viega, "The Galois/Counter Mode of Operation" (the test
    /// cases NIST's SP 800-38D validation draws on), AES-256 with 96-bit IVs.
    static let vectors: [Vector] = [
        Vector(name: "test case 13: empty", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
               aad: "", plaintext: "", ciphertext: "", tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(name: "test case 14: one zero block", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
               aad: "", plaintext: String(repeating: "00", count: 16),
               ciphertext: "cea7403d4d606b6e074ec5d3baf39d18", tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(name: "test case 16: partial block and AAD",
               key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", nonce: "cafebabefacedbaddecaf888",
               aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
               plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                   + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
               ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                   + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
               tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test(arguments: vectors)
    func knownAnswers(vector: Vector) throws {
        let aead = try AES256GCM(key: Self.hex(vector.key))
        let nonce = try AES256GCM.Nonce(Self.hex(vector.nonce))
        let box = aead.seal(Self.hex(vector.plaintext), nonce: nonce, authenticating: Self.hex(vector.aad))
        #expect(box.ciphertext == Self.hex(vector.ciphertext))
        #expect(box.tag == Self.hex(vector.tag))
        let given = try AES256GCM.SealedBox(nonce: nonce, ciphertext: Self.hex(vector.ciphertext), tag: Self.hex(vector.tag))
        #expect(try aead.open(given, authenticating: Self.hex(vector.aad)) == Self.hex(vector.plaintext))
    }

    static let key = (0..<32).map { UInt8($0) }

    @Test func aSealedBoxOpensThroughItsCombinedForm() throws {
        let aead = try AES256GCM(key: Self.key)
        for plaintext in [[], Array("x".utf8), Array("a refresh token, longer than one block".utf8)] {
            let box = aead.seal(plaintext, authenticating: [1])
            #expect(box.combined.count == 12 + plaintext.count + 16)
            #expect(try aead.open(AES256GCM.SealedBox(combined: box.combined), authenticating: [1]) == plaintext)
        }
    }

    @Test func eachSealTakesAFreshNonce() throws {
        let aead = try AES256GCM(key: Self.key)
        let first = aead.seal(Array("same".utf8)), second = aead.seal(Array("same".utf8))
        #expect(first.nonce != second.nonce)
        #expect(first.ciphertext != second.ciphertext)
    }

    @Test func anyChangedByteIsDetected() throws {
        let aead = try AES256GCM(key: Self.key)
        let combined = aead.seal(Array("token-value".utf8), authenticating: [1]).combined
        for index in combined.indices {
            for bit in [0x01, 0x80] as [UInt8] {
                var tampered = combined
                tampered[index] ^= bit
                #expect(throws: AES256GCMError.authenticationFailed, "byte \(index) bit \(bit)") {
                    try aead.open(AES256GCM.SealedBox(combined: tampered), authenticating: [1])
                }
            }
        }
        let box = try AES256GCM.SealedBox(combined: combined)
        #expect(throws: AES256GCMError.authenticationFailed) { try aead.open(box, authenticating: [2]) }
        #expect(throws: AES256GCMError.authenticationFailed) { try aead.open(box) }
        let truncated = try AES256GCM.SealedBox(nonce: box.nonce, ciphertext: Array(box.ciphertext.dropLast()), tag: box.tag)
        #expect(throws: AES256GCMError.authenticationFailed) { try aead.open(truncated, authenticating: [1]) }
        let otherKey = try AES256GCM(key: [UInt8](repeating: 7, count: 32))
        #expect(throws: AES256GCMError.authenticationFailed) { try otherKey.open(box, authenticating: [1]) }
    }

    @Test func wrongLengthsAreTypedErrors() {
        #expect(throws: AES256GCMError.invalidKeyLength(16)) { try AES256GCM(key: [UInt8](repeating: 0, count: 16)) }
        #expect(throws: AES256GCMError.invalidNonceLength(16)) { try AES256GCM.Nonce([UInt8](repeating: 0, count: 16)) }
        #expect(throws: AES256GCMError.invalidTagLength(12)) {
            try AES256GCM.SealedBox(nonce: AES256GCM.Nonce(), ciphertext: [], tag: [UInt8](repeating: 0, count: 12))
        }
        #expect(throws: AES256GCMError.sealedBoxTooShort(27)) { try AES256GCM.SealedBox(combined: [UInt8](repeating: 0, count: 27)) }
    }

    @Test func theKeyNeverShowsInDescriptions() throws {
        let key = [UInt8](repeating: 0xAB, count: 32)
        let aead = try AES256GCM(key: key)
        var dumped = ""
        dump(aead, to: &dumped)
        for text in [String(describing: aead), String(reflecting: aead), "\(aead)", dumped] {
            #expect(!text.contains("171"), "\(text)")
            #expect(text.contains("AES256GCM"))
        }
    }
}
