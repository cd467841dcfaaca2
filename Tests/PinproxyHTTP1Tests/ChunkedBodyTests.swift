import PinproxyHTTP1
import Testing

@Suite struct ChunkedBodyTests {
    /// Reads `text` as a chunked body cut into reads of `step` bytes: the data
    /// read, and where the body ended in the text (nil: not yet).
    func read(_ text: String, step: Int = .max) throws -> (data: String, end: Int?) {
        let bytes = Array(text.utf8)
        var body = ChunkedBody()
        var data: [UInt8] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + step)
            let outcome = try bytes[start..<end].withUnsafeBytes { (piece: UnsafeRawBufferPointer) throws -> ChunkedBody.Outcome in
                try body.read(piece) { data += piece[$0.start..<$0.end] }
            }
            if case .ended(let consumed) = outcome { return (String(decoding: data, as: UTF8.self), start + consumed) }
            start = end
        }
        return (String(decoding: data, as: UTF8.self), nil)
    }

    @Test func chunksAreReadToTheLastOneInAnyCutOfTheBytes() throws {
        let text = "5\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n000\r\n\r\nGET /next"
        for step in 1...text.utf8.count {
            let (data, end) = try read(text, step: step)
            #expect(data == "helloabcdefghijklmnopqrstuvwxyz", "step \(step)")
            #expect(end == text.utf8.count - "GET /next".utf8.count, "step \(step)")
        }
    }

    @Test func aBodyWithoutItsLastChunkNeedsMore() throws {
        let (data, end) = try read("3\r\nabc\r\n")
        #expect(data == "abc")
        #expect(end == nil)
    }

    @Test(arguments: [
        ("5;ext=1\r\nhello\r\n0\r\n\r\n", ChunkRefusal.extension),
        ("5 \r\nhello\r\n0\r\n\r\n", .badSize),
        (" 5\r\nhello\r\n0\r\n\r\n", .badSize),
        ("0x5\r\nhello\r\n0\r\n\r\n", .badSize),
        ("-1\r\n", .badSize),
        ("\r\n", .badSize),
        ("5\nhello\r\n0\r\n\r\n", .badSize),
        ("5\r\nhello\n0\r\n\r\n", .bareLineEnd),
        ("5\r\nhelloX\r\n0\r\n\r\n", .bareLineEnd),
        ("5\r\nhello\r\n0\r\nX-Trailer: a\r\n\r\n", .trailers),
        ("5\r\nhello\r\n0\r\n\n", .trailers),
        ("10000000000000000\r\n", .sizeTooLarge),
    ])
    func aBodyTwoParsersCouldReadDifferentlyIsRefused(text: String, refusal: ChunkRefusal) {
        #expect(throws: refusal) { _ = try read(text) }
    }

    @Test func theLargestSizeIsSixteenHexDigits() throws {
        var body = ChunkedBody()
        let outcome = try Array("FFFFFFFFFFFFFFFF\r\nab".utf8).withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> ChunkedBody.Outcome in
            try body.read(bytes) { _ in }
        }
        #expect(outcome == .needMore)
    }
}
