import Foundation
import PinproxyPolicy
import PinproxyTLS
import Testing
@testable import PinproxySessionStore

@Suite("Session store cipher")
struct SessionTokenCipherTests {
    static let key = Secret(Base64.encode(Array(repeating: 7, count: 32)) + "\n")
    static let otherKey = Secret(Base64.encode(Array(repeating: 8, count: 32)))

    @Test func formatIsVersionNonceCiphertextTag() throws {
        let cipher = try SessionTokenCipher(base64Key: Self.key)
        let token = "BQD-access-token-value"
        let sealed = cipher.seal(Secret(token), session: "app", field: .access)
        #expect(sealed.first == 1)
        #expect(sealed.count == 1 + 12 + token.utf8.count + 16)
        #expect(!String(decoding: sealed, as: UTF8.self).contains(token))
        #expect(try cipher.open(sealed, session: "app", field: .access) == Secret(token))
    }

    @Test func everySealHasAFreshNonce() throws {
        let cipher = try SessionTokenCipher(base64Key: Self.key)
        let a = cipher.seal(Secret("same"), session: "app", field: .refresh)
        let b = cipher.seal(Secret("same"), session: "app", field: .refresh)
        #expect(a[1..<13] != b[1..<13])
        #expect(a != b)
    }

    @Test func aValueOpensOnlyForItsSessionItsColumnAndItsKey() throws {
        let cipher = try SessionTokenCipher(base64Key: Self.key)
        let sealed = cipher.seal(Secret("refresh"), session: "app", field: .refresh)
        #expect(throws: SessionTokenCipher.OpenError.notAuthentic) { try cipher.open(sealed, session: "other", field: .refresh) }
        #expect(throws: SessionTokenCipher.OpenError.notAuthentic) { try cipher.open(sealed, session: "app", field: .access) }
        let other = try SessionTokenCipher(base64Key: Self.otherKey)
        #expect(throws: SessionTokenCipher.OpenError.notAuthentic) { try other.open(sealed, session: "app", field: .refresh) }
        var tampered = sealed
        tampered[20] ^= 1
        #expect(throws: SessionTokenCipher.OpenError.notAuthentic) { try cipher.open(tampered, session: "app", field: .refresh) }
    }

    @Test func anotherVersionOrATruncatedValueIsRefusedByName() throws {
        let cipher = try SessionTokenCipher(base64Key: Self.key)
        var sealed = cipher.seal(Secret("x"), session: "app", field: .access)
        #expect(throws: SessionTokenCipher.OpenError.tooShort) { try cipher.open(Array(sealed.prefix(29)), session: "app", field: .access) }
        sealed[0] = 2
        #expect(throws: SessionTokenCipher.OpenError.unknownVersion(2)) { try cipher.open(sealed, session: "app", field: .access) }
    }

    @Test func aKeyMustBeBase64Of32Bytes() {
        #expect(throws: (any Error).self) { try SessionTokenCipher(base64Key: Secret(Base64.encode(Array(repeating: 1, count: 16)))) }
        #expect(throws: (any Error).self) { try SessionTokenCipher(base64Key: Secret("not base64 !")) }
    }
}
