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

    @Test func extensionsAreReadOverAndTrailersKept() throws {
        let text = "5;name\r\nhello\r\n3;a=b;c=\"d e\"\r\nabc\r\n0\r\nX-Sum: 1 \r\nX-Other:two\r\n\r\n"
        var body = ChunkedBody()
        var data: [UInt8] = []
        let bytes = Array(text.utf8)
        let outcome = try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ChunkedBody.Outcome in
            try body.read(raw) { data += raw[$0.start..<$0.end] }
        }
        #expect(outcome == .ended(consumed: bytes.count))
        #expect(String(decoding: data, as: UTF8.self) == "helloabc")
        #expect(body.trailers.map { [String(decoding: $0.name, as: UTF8.self), String(decoding: $0.value, as: UTF8.self)] }
            == [["X-Sum", "1"], ["X-Other", "two"]])
    }

    @Test(arguments: [
        ("5 \r\nhello\r\n0\r\n\r\n", ChunkRefusal.badSize),
        (" 5\r\nhello\r\n0\r\n\r\n", .badSize),
        ("0x5\r\nhello\r\n0\r\n\r\n", .badSize),
        ("-1\r\n", .badSize),
        ("\r\n", .badSize),
        ("5\nhello\r\n0\r\n\r\n", .badSize),
        ("5;\r\nhello\r\n0\r\n\r\n", .badExtension),
        ("5; a\r\nhello\r\n0\r\n\r\n", .badExtension),
        ("5;a=\r\nhello\r\n0\r\n\r\n", .badExtension),
        ("5;a=\"b\\\"c\"\r\nhello\r\n0\r\n\r\n", .badExtension),
        ("5;a=\"b\"c\r\nhello\r\n0\r\n\r\n", .badExtension),
        ("5;a\nhello\r\n0\r\n\r\n", .badExtension),
        ("5\r\nhello\n0\r\n\r\n", .bareLineEnd),
        ("5\r\nhelloX\r\n0\r\n\r\n", .bareLineEnd),
        ("5\r\nhello\r\n0\r\nX-T : a\r\n\r\n", .badTrailer),
        ("5\r\nhello\r\n0\r\n X-T: a\r\n\r\n", .badTrailer),
        ("5\r\nhello\r\n0\r\nX-T: a\u{01}\r\n\r\n", .badTrailer),
        ("5\r\nhello\r\n0\r\nX-T: a\nY: b\r\n\r\n", .badTrailer),
        ("5\r\nhello\r\n0\r\n\n", .badTrailer),
        ("10000000000000000\r\n", .sizeTooLarge),
        ("5\r\nhello\r\n0\r\nContent-Length: 0\r\n\r\n", .framingTrailer),
        ("5\r\nhello\r\n0\r\nX-T: a\r\ncontent-LENGTH: 5\r\n\r\n", .framingTrailer),
    ])
    func aBodyTwoParsersCouldReadDifferentlyIsRefused(text: String, refusal: ChunkRefusal) {
        #expect(throws: refusal) { _ = try read(text) }
    }

    /// NIO's decoder refuses a `Transfer-Encoding` trailer in a request and
    /// reads one in a response; so does this.
    @Test func aTransferEncodingTrailerIsRefusedInARequestOnly() throws {
        let text = Array("0\r\nTransfer-Encoding: gzip\r\n\r\n".utf8)
        var request = ChunkedBody(inRequest: true)
        #expect(throws: ChunkRefusal.framingTrailer) { _ = try text.withUnsafeBytes { try request.read($0) { _ in } } }
        var response = ChunkedBody()
        #expect(try text.withUnsafeBytes { try response.read($0) { _ in } } == .ended(consumed: text.count))
    }

    @Test func trailersCountAgainstWhatTheHeadLeftOfItsLimits() throws {
        let parser = HeadParser(kind: .request, maxFieldBytes: 20, maxFieldCount: 2)
        let headBytes = Array("POST / HTTP/1.1\r\nA: 12345\r\n\r\n".utf8)
        let head = try headBytes.withUnsafeBytes { raw throws -> ParsedHead in
            guard case .head(let head) = parser.parse(raw) else { throw ChunkRefusal.badSize }
            return head
        }
        #expect(head.countedBytes == 7)  // "/", "A", "12345"
        func readAfterHead(_ text: String) throws {
            var body = ChunkedBody(after: head, limits: parser)
            _ = try Array(text.utf8).withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws -> ChunkedBody.Outcome in try body.read(raw) { _ in } }
        }
        // 13 bytes left, one field: "B" + "123456789012" fits, one byte more or a second field does not.
        try readAfterHead("0\r\nB: 123456789012\r\n\r\n")
        #expect(throws: ChunkRefusal.trailersTooLong) { try readAfterHead("0\r\nB: 1234567890123\r\n\r\n") }
        #expect(throws: ChunkRefusal.trailersTooLong) { try readAfterHead("0\r\nB: 1\r\nC: 2\r\n\r\n") }
        // Trailing whitespace counts, as NIO counts it.
        #expect(throws: ChunkRefusal.trailersTooLong) { try readAfterHead("0\r\nB: 12345678901 \t\r\n\r\n") }
    }

    @Test func theLargestSizeIsSixteenHexDigits() throws {
        var body = ChunkedBody()
        let outcome = try Array("FFFFFFFFFFFFFFFF\r\nab".utf8).withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> ChunkedBody.Outcome in
            try body.read(bytes) { _ in }
        }
        #expect(outcome == .needMore)
    }
}
