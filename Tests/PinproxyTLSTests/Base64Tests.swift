import Foundation
import PinproxyTLS
import Testing

@Suite("Base64 and Base64URL (RFC 4648)")
struct Base64Tests {
    /// RFC 4648 §10.
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test(arguments: vectors)
    func theRFCVectorsEncodeAndDecode(plain: String, encoded: String) throws {
        #expect(Base64.encode(Array(plain.utf8)) == encoded)
        #expect(Base64.decode(encoded) == Array(plain.utf8))
        // §5 is the same text with `-_` for `+/`, and here without the padding.
        let unpadded = encoded.replacingOccurrences(of: "=", with: "")
        #expect(Base64URL.encode(Array(plain.utf8)) == unpadded)
        #expect(Base64URL.decode(unpadded) == Array(plain.utf8))
    }

    @Test func theTwoAlphabetsDifferOnlyInTheLastTwoSymbols() throws {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64URL.encode(bytes) == "-_-_")
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test func everyLengthAndByteRoundTripsAndAgreesWithFoundation() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64.encode(bytes)
            #expect(encoded == Data(bytes).base64EncodedString())
            #expect(Base64.decode(encoded) == bytes)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        let all = (0...255).map(UInt8.init)
        #expect(Base64.decode(Base64.encode(all)) == all)
        #expect(Base64URL.decode(Base64URL.encode(all)) == all)
    }

    static let refusedStandard: [(String, Base64DecodingError)] = [
        ("Zg", .invalidLength(2)),                  // padding is required
        ("Zg=", .invalidLength(3)),
        ("Zm9vY", .invalidLength(5)),
        ("Zm8 ", .invalidCharacter(offset: 3)),     // no whitespace
        ("Zm9v\nZm8=", .invalidLength(9)),
        ("Z=g=", .invalidCharacter(offset: 1)),     // `=` only at the end
        ("A===", .invalidCharacter(offset: 1)),     // at most two
        ("====", .invalidCharacter(offset: 0)),
        ("-_8=", .invalidCharacter(offset: 0)),     // the URL alphabet is another alphabet
    ]

    @Test(arguments: refusedStandard)
    func nonCanonicalStandardTextIsRefused(text: String, error: Base64DecodingError) {
        #expect(Base64.decode(text) == nil)
        #expect(Base64.diagnose(text) == error)
    }

    static let refusedURL: [(String, Base64DecodingError)] = [
        ("Zg==", .invalidCharacter(offset: 2)),     // never padded
        ("Z", .invalidLength(1)),
        ("Zm9vY", .invalidLength(5)),
        ("+/8", .invalidCharacter(offset: 0)),
        ("Zm 9", .invalidCharacter(offset: 2)),
        ("Zm9v\u{e9}", .invalidCharacter(offset: 4)),
    ]

    @Test(arguments: refusedURL)
    func nonCanonicalURLTextIsRefused(text: String, error: Base64DecodingError) {
        #expect(Base64URL.decode(text) == nil)
        #expect(Base64URL.diagnose(text) == error)
    }

    @Test func aDiagnosisNeverRepeatsTheText() throws {
        // The text may be a key or a token: the error says where, not what.
        let secret = "c2VjcmV0LWtleQ!"
        let error = try #require(Base64URL.diagnose(secret))
        #expect(error == .invalidCharacter(offset: 14))
        #expect(!error.description.contains("c2Vj"))
        #expect(!String(reflecting: error).contains("c2Vj"))
    }

    /// RFC 4648 §3.5 allows either; Foundation ignores these bits, and
    /// configs hold placeholder pins (`BBBB…B=`) that rely on it.
    @Test func bitsPastTheDataAreIgnored() {
        #expect(Base64.decode("Zh==") == Array("f".utf8))
        #expect(Base64URL.decode("Zh") == Array("f".utf8))
        let placeholder = String(repeating: "B", count: 43) + "="
        #expect(Base64.decode(placeholder)?.count == 32)
        #expect(Base64.decode(placeholder).map { Data($0) } == Data(base64Encoded: placeholder))
    }

    @Test func canonicalTextHasNoDiagnosis() {
        #expect(Base64.diagnose("Zm9vYg==") == nil)
        #expect(Base64URL.diagnose("Zm9vYg") == nil)
        #expect(Base64URL.diagnose("") == nil)
    }
}
