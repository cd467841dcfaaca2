import PinproxyHTTP1
@testable import PinproxyHTTP1NIO
import Testing

/// The writers' byte classes are masks of their own (a table in another
/// module costs a lazy global's check per byte); they must be the head
/// parser's classes, byte for byte, or the writers would send what the
/// parser refuses, or refuse what it reads.
@Suite("The writers' byte classes")
struct HeadBytesTests {
    @Test func theTokenAndValueMasksAreTheParsersClasses() {
        for byte in UInt8.min...UInt8.max {
            #expect(HeadBytes.isTokenByte(byte) == ByteClass.token[Int(byte)], "token, byte \(byte)")
            #expect(HeadBytes.isFieldValueByte(byte) == ByteClass.text[Int(byte)], "value, byte \(byte)")
        }
    }
}
