import PinproxyHTTP1
import Testing

@Suite struct BodyFramingTests {
    func requestFraming(_ fields: String, version: String = "HTTP/1.1", method: String = "POST") -> Result<BodyFraming, FramingRefusal>? {
        let target = method == "CONNECT" ? "a.test:443" : "/"
        let bytes = Array("\(method) \(target) \(version)\r\n\(fields)\r\n".utf8)
        return bytes.withUnsafeBytes { raw -> Result<BodyFraming, FramingRefusal>? in
            guard case .head(let head) = HeadParser(kind: .request, maxFieldBytes: 4096, maxFieldCount: 32).parse(raw) else { return nil }
            return head.requestFraming(in: raw)
        }
    }

    func responseFraming(_ status: Int, _ fields: String, headOrConnect: Bool = false) -> Result<BodyFraming, FramingRefusal>? {
        let bytes = Array("HTTP/1.1 \(status) X\r\n\(fields)\r\n".utf8)
        return bytes.withUnsafeBytes { raw -> Result<BodyFraming, FramingRefusal>? in
            guard case .head(let head) = HeadParser(kind: .response, maxFieldBytes: 4096, maxFieldCount: 32).parse(raw) else { return nil }
            return head.responseFraming(in: raw, requestHadNoBody: headOrConnect)
        }
    }

    func isRefused(_ result: Result<BodyFraming, FramingRefusal>?) -> Bool {
        if case .failure = result { return true }
        return false
    }

    @Test func aRequestIsFramedByItsOneLengthOrByChunkedAlone() {
        #expect(requestFraming("") == .success(.none))
        #expect(requestFraming("Content-Length: 12\r\n") == .success(.length(12)))
        #expect(requestFraming("content-LENGTH: 0\r\n") == .success(.length(0)))
        #expect(requestFraming("Transfer-Encoding: chunked\r\n") == .success(.chunked))
        #expect(requestFraming("Transfer-Encoding: CHUNKED \r\n") == .success(.chunked))
    }

    @Test(arguments: [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5, 5\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: 0x5\r\n",
        "Content-Length: \r\n",
        "Content-Length: 99999999999999999999\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: chunked,\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: xchunked\r\n",
        "Connection: close, Content-Length\r\nContent-Length: 3\r\n",
        "Connection: transfer-encoding\r\n",
    ])
    func aRequestTwoParsersCouldDelimitDifferentlyIsRefused(fields: String) {
        #expect(isRefused(requestFraming(fields)), "\(fields.debugDescription)")
    }

    @Test func chunkedInAnHTTP10RequestIsRefused() {
        #expect(isRefused(requestFraming("Transfer-Encoding: chunked\r\n", version: "HTTP/1.0")))
    }

    @Test func tooManyConnectionTokensAreRefused() {
        let many = Array(repeating: "a", count: ParsedHead.maxConnectionTokens + 1).joined(separator: ", ")
        #expect(isRefused(requestFraming("Connection: \(many)\r\n")))
        let enough = Array(repeating: "a", count: ParsedHead.maxConnectionTokens).joined(separator: ", ")
        #expect(requestFraming("Connection: \(enough)\r\n") == .success(.none))
    }

    @Test func aConnectOrAnUpgradeLeavesHTTP() {
        #expect(requestFraming("", method: "CONNECT") == .success(.switchesProtocol))
        // An upgrade request's body is framed as any (the reader switches after it).
        #expect(requestFraming("Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 1\r\n", method: "GET") == .success(.length(1)))
        #expect(requestFraming("Upgrade: websocket\r\n", method: "GET") == .success(.none))
    }

    @Test func aResponseIsFramedAsRFC9112Says() {
        #expect(responseFraming(200, "Content-Length: 3\r\n") == .success(.length(3)))
        #expect(responseFraming(200, "Transfer-Encoding: gzip, chunked\r\n") == .success(.chunked))
        #expect(responseFraming(200, "Transfer-Encoding: gzip\r\n") == .success(.untilClose))
        #expect(responseFraming(200, "") == .success(.untilClose))
        #expect(responseFraming(204, "Content-Length: 3\r\n") == .success(.none))
        #expect(responseFraming(304, "Content-Length: 3\r\n") == .success(.none))
        #expect(responseFraming(103, "") == .success(.none))
        #expect(responseFraming(200, "Content-Length: 3\r\n", headOrConnect: true) == .success(.none))
        #expect(responseFraming(101, "Upgrade: websocket\r\n") == .success(.switchesProtocol))
        #expect(isRefused(responseFraming(200, "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n")))
        #expect(isRefused(responseFraming(200, "Content-Length: 3\r\nContent-Length: 4\r\n")))
    }

    /// NIO reads a length as its field arrives, so a bad one is refused even
    /// where no body follows (found by the `head` fuzz target: a `101` with
    /// `Content-Length: 5` and high bytes).
    @Test func aBadLengthIsRefusedWhereNoBodyFollowsToo() {
        #expect(isRefused(responseFraming(101, "Content-Length: 5\u{80}\r\n")))
        #expect(isRefused(responseFraming(204, "Content-Length: x\r\n")))
        #expect(isRefused(requestFraming("Content-Length: x\r\n", method: "CONNECT")))
        #expect(isRefused(requestFraming("Content-Length: 1, 1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n", method: "GET")))
    }
}
