import PinproxyHTTP1
import Testing

@Suite struct MessageReaderTests {
    /// What a reader made of a stream: each event as a line, and the bytes
    /// it left unconsumed at the end.
    struct Trace {
        var events: [String] = []
        var unconsumed: [UInt8] = []
    }

    func trace(_ text: String, kind: HeadParser.Kind = .request, readSize: Int = .max,
               setUp: (inout MessageReader) -> Void = { _ in }, closeAfter: Bool = false) throws -> Trace {
        var reader = MessageReader(parser: HeadParser(kind: kind, maxFieldBytes: 4096, maxFieldCount: 32))
        setUp(&reader)
        var trace = Trace()
        let input = Array(text.utf8)
        var start = 0
        while start < input.count {
            let end = start + min(readSize, input.count - start)
            trace.unconsumed += input[start..<end]
            start = end
            let consumed = try trace.unconsumed.withUnsafeBytes { bytes in
                try reader.read(bytes) { event in trace.events.append(Self.describe(event, in: bytes)) }
            }
            trace.unconsumed.removeFirst(consumed)
        }
        if closeAfter { try reader.connectionClosed(unconsumedBytes: trace.unconsumed.count) { trace.events.append(Self.describe($0, in: UnsafeRawBufferPointer(start: nil, count: 0))) } }
        return trace
    }

    static func describe(_ event: MessageReader.Event, in bytes: UnsafeRawBufferPointer) -> String {
        switch event {
        case .head(let head, let at, let framing):
            let start = head.status == 0 ? head.method : ByteSpan(start: 9, count: 3)
            return "head \(String(decoding: bytes[(at + start.start)..<(at + start.end)], as: UTF8.self)) \(framing)"
        case .body(let span):
            return "body \(String(decoding: bytes[span.start..<span.end], as: UTF8.self))"
        case .end(let trailers):
            return "end" + trailers.map { " \(String(decoding: $0.name, as: UTF8.self))" }.joined()
        }
    }

    /// Adjacent body events joined, so traces compare across read sizes.
    func joined(_ events: [String]) -> [String] {
        events.reduce(into: []) { out, event in
            if event.hasPrefix("body "), let last = out.last, last.hasPrefix("body ") {
                out[out.count - 1] = last + event.dropFirst(5)
            } else {
                out.append(event)
            }
        }
    }

    @Test func pipelinedRequestsReadTheSameInReadsOfAnySize() throws {
        let text = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\nGET /c HTTP/1.1\r\n\r\n"
        let expected = ["head POST length(3)", "body abc", "end", "head PUT chunked", "body de", "end T", "head GET none", "end"]
        for size in 1...text.utf8.count {
            let trace = try trace(text, readSize: size)
            #expect(joined(trace.events) == expected, "reads of \(size)")
            #expect(trace.unconsumed.isEmpty, "reads of \(size)")
        }
    }

    @Test func aConnectLeavesWhatFollowsItsHeadUnconsumed() throws {
        let trace = try trace("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test\r\n\r\n\u{16}\u{03}\u{01}")
        #expect(trace.events == ["head CONNECT switchesProtocol", "end"])
        #expect(trace.unconsumed == [0x16, 0x03, 0x01])
    }

    /// NIO reads an upgrade request's body, then nothing (found by the `head`
    /// fuzz target: a WebSocket upgrade with `Content-Length: 1`).
    @Test func anUpgradeRequestsBodyIsReadThenWhatFollowsIsLeft() throws {
        let trace = try trace("GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 1\r\n\r\nxFRAME")
        #expect(trace.events == ["head GET length(1)", "body x", "end"])
        #expect(trace.unconsumed == Array("FRAME".utf8))
    }

    @Test func nothingMayFollowAMessageThatEndsItsConnection() throws {
        #expect(throws: MessageRefusal.afterLastMessage) {
            _ = try trace("GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n")
        }
        #expect(throws: MessageRefusal.afterLastMessage) { _ = try trace("GET / HTTP/1.0\r\n\r\nX") }
        #expect(try trace("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\n\r\n").events.count == 4)
    }

    @Test func aResponseIsReadForTheRequestItAnswers() throws {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        // The first request was a HEAD: its answer's length frames no body.
        let trace = try trace(text, kind: .response, setUp: {
            $0.requestSent(expectingNoBody: true)
            $0.requestSent(expectingNoBody: false)
        })
        #expect(trace.events == ["head 100 none", "head 200 none", "end", "head 200 length(2)", "body ok", "end"])
        #expect(throws: MessageRefusal.unsolicitedResponse) { _ = try self.trace("HTTP/1.1 200 OK\r\n\r\n", kind: .response) }
        // An informational answer ends its connection as any message does
        // (found by the `head` fuzz target: an HTTP/1.0 `100`, then more).
        #expect(throws: MessageRefusal.afterLastMessage) {
            _ = try self.trace("HTTP/1.0 100 Continue\r\n\r\nHTTP/1.1 199 X\r\n\r\n", kind: .response, setUp: { $0.requestSent(expectingNoBody: false) })
        }
    }

    @Test func aResponseReadToItsCloseEndsThereAndOneCutOffIsRefused() throws {
        let sent: (inout MessageReader) -> Void = { $0.requestSent(expectingNoBody: false) }
        let trace = try trace("HTTP/1.1 200 OK\r\n\r\nall of it", kind: .response, setUp: sent, closeAfter: true)
        #expect(trace.events == ["head 200 untilClose", "body all of it", "end"])
        #expect(throws: MessageRefusal.cutOff) {
            _ = try self.trace("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhalf", kind: .response, setUp: sent, closeAfter: true)
        }
        for partial in ["H", "HTTP/1.1 200 OK\r\nCont"] {
            #expect(throws: MessageRefusal.cutOff) { _ = try self.trace(partial, kind: .response, setUp: sent, closeAfter: true) }
        }
        #expect(try self.trace("", kind: .response, setUp: sent, closeAfter: true).events.isEmpty)
    }
}
