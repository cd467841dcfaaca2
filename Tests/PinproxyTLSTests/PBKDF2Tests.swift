import PinproxyTLS
import Testing

/// PBKDF2-HMAC-SHA-256 against published vectors, and the constant-time compare.
struct PBKDF2Tests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// RFC 7914 §11 (PBKDF2-HMAC-SHA256 test vectors).
    @Test func rfc7914Vectors() {
        let one = PBKDF2SHA256.derive(password: Array("passwd".utf8), salt: Array("salt".utf8), iterations: 1, length: 64)
        #expect(Self.hex(one) == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783")
        let many = PBKDF2SHA256.derive(password: Array("Password".utf8), salt: Array("NaCl".utf8), iterations: 80000, length: 64)
        #expect(Self.hex(many) == "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d")
    }

    @Test func emptyPasswordIsAccepted() {
        #expect(PBKDF2SHA256.derive(password: [], salt: Array("salt".utf8), iterations: 2).count == 32)
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equals([], []))
    }
}
