import NIOCore
@testable import PinproxyTLS
import Testing

/// The transport BIO hands OpenSSL exactly the bytes fed, in order, across
/// bursts and partial reads, and hands the network exactly what OpenSSL wrote.
@Suite("Transport BIO")
struct TransportBIOTests {
    private func read(_ transport: TransportBIO, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { transport.read(into: $0.baseAddress!, count: count) }
        return read < 0 ? nil : Array(bytes.prefix(Int(read)))
    }

    @Test func bytesFedAcrossBurstsAreReadInOrderAndThenNothing() {
        let transport = TransportBIO()
        #expect(!transport.hasInput)
        #expect(read(transport, 8) == nil)  // nothing yet: "retry"
        transport.feed(ByteBuffer(string: "abc"))
        #expect(read(transport, 2) == Array("ab".utf8))
        // A second burst while part of the first is unread: appended after it.
        transport.feed(ByteBuffer(string: "def"))
        #expect(transport.hasInput)
        #expect(read(transport, 10) == Array("cdef".utf8))
        #expect(!transport.hasInput)
        #expect(read(transport, 1) == nil)
        transport.feed(ByteBuffer())  // an empty burst changes nothing
        #expect(!transport.hasInput)
    }

    @Test func onlyTheReadableBytesOfAFedBufferCount() {
        let transport = TransportBIO()
        var first = ByteBuffer(string: "xyz")
        first.moveReaderIndex(forwardBy: 1)  // a slice: only its readable bytes count
        transport.feed(first)
        #expect(read(transport, 10) == Array("yz".utf8))
    }

    @Test func writesAreHandedOverOnceInOrder() {
        let transport = TransportBIO()
        #expect(transport.takeOutput() == nil)
        transport.reserveOutput(forPlaintext: 100)
        #expect(!transport.hasOutput)
        #expect(transport.takeOutput() == nil)  // room, but nothing written
        for chunk in ["one ", "two ", "three"] {
            let written = Array(chunk.utf8).withUnsafeBytes { transport.write(from: $0.baseAddress!, count: $0.count) }
            #expect(written == Int32(chunk.utf8.count))
        }
        #expect(transport.hasOutput)
        #expect(transport.takeOutput().map { String(buffer: $0) } == "one two three")
        #expect(transport.takeOutput() == nil)
        _ = Array("four".utf8).withUnsafeBytes { transport.write(from: $0.baseAddress!, count: $0.count) }
        #expect(transport.takeOutput().map { String(buffer: $0) } == "four")
    }
}
