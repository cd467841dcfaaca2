import PinproxyTLS
import Testing

@Suite("SecureRandom and SHA-256")
struct SecureRandomAndDigestTests {
    @Test func randomBytesHaveTheAskedLengthAndDiffer() {
        #expect(SecureRandom.bytes(0).isEmpty)
        #expect(SecureRandom.bytes(1).count == 1)
        let a = SecureRandom.bytes(32), b = SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b, "two 256-bit draws collide with probability 2^-256")
    }

    /// FIPS 180-2, appendix B.1, and the empty message.
    @Test func sha256KnownAnswers() {
        let hex = { (bytes: [UInt8]) in bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined() }
        #expect(hex(SHA256Digest.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(SHA256Digest.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Digest.base64(Array("abc".utf8)) == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
    }
}
