import PinproxyHTTP1
import Testing

@Suite struct HeadParserTests {
    let requests = HeadParser(kind: .request, maxFieldBytes: 2048, maxFieldCount: 8)
    let responses = HeadParser(kind: .response, maxFieldBytes: 2048, maxFieldCount: 8)

    func parse(_ text: String, _ parser: HeadParser? = nil) -> HeadParser.Outcome {
        Array(text.utf8).withUnsafeBytes { (parser ?? requests).parse($0) }
    }

    func readHead(_ text: String, _ parser: HeadParser? = nil) -> ParsedHead? {
        guard case .head(let head) = parse(text, parser) else { return nil }
        return head
    }

    func piece(_ text: String, _ span: ByteSpan) -> String {
        String(decoding: Array(text.utf8)[span.start..<span.end], as: UTF8.self)
    }

    /// A start line that cannot start a head is refused once its CRLF has
    /// come, as NIO's decoder refuses it, not when the head ends: an app
    /// that sends half a bad head and waits is answered at once. A good
    /// start line leaves the head incomplete, and a bare LF is left to the
    /// whole head's reading.
    @Test(arguments: [
        ("GET /caf\u{E9} HTTP/1.1\r\nHost: x\r\n", HeadRefusal.badTarget),
        ("GET / HTTP/1.2\r\nHost: x\r\n", .badVersion),
        ("GET / HTTP/1.1 \r\n", .badVersion),
        ("GET / HTTP/1.1\rX\r\n", .bareLineEnd),
    ])
    func aBadStartLineIsRefusedBeforeTheHeadEnds(text: String, refusal: HeadRefusal) {
        guard case .refused(let found) = parse(text) else {
            Issue.record("\(text.debugDescription) was not refused")
            return
        }
        #expect(found == refusal)
    }

    /// A head that arrives a byte at a time: a good one waits at every
    /// byte for its end; a bad start line is refused at its LF, not before
    /// and not at the head's end.
    @Test func aStartLineSentAByteAtATimeIsJudgedAtItsLineFeed() {
        let bytes = Array("GET /a HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n".utf8)
        var search = HeadParser.Search()
        for cut in 1..<bytes.count {
            #expect(bytes[0..<cut].withUnsafeBytes { requests.parse($0, search: &search) } == .incomplete, "cut at \(cut)")
        }
        let bad = Array("GET /caf\u{E9} HTTP/1.1\r\nHost: a\r\n".utf8)
        search = HeadParser.Search()
        var refusedAt: Int?
        for cut in 1...bad.count where refusedAt == nil {
            if case .refused(.badTarget) = bad[0..<cut].withUnsafeBytes({ requests.parse($0, search: &search) }) { refusedAt = cut }
        }
        #expect(refusedAt == Array("GET /caf\u{E9} HTTP/1.1\r\n".utf8).count)
    }

    /// A field line that cannot be one is refused once its CRLF has come,
    /// with the reason the whole head's reading gives: an app (or an
    /// upstream) that sends a bad field and waits is answered at once, as
    /// NIO's decoder answers it, not at the head timer.
    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n", HeadRefusal.badFieldName),
        ("GET / HTTP/1.1\r\nNoColon\r\n", .badFieldName),
        ("GET / HTTP/1.1\r\n: empty name\r\n", .badFieldName),
        ("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n", .foldedLine),
        ("GET / HTTP/1.1\r\nX: a\rb\r\n", .bareLineEnd),
        ("GET / HTTP/1.1\r\nHost: x\r\n\rX\r\n", .bareLineEnd),
        ("GET / HTTP/1.1\r\nX: \(String(repeating: "v", count: 2100))\r\n", .tooLarge),
        ("GET / HTTP/1.1\r\n" + (0..<9).map { "F\($0): v\r\n" }.joined(), .tooManyFields),
    ])
    func aBadFieldLineIsRefusedBeforeTheHeadEnds(text: String, refusal: HeadRefusal) {
        #expect(parse(text) == .refused(refusal), "\(text.prefix(60).debugDescription)")
        // The same line with the head ended: the same refusal.
        #expect(parse(text + "\r\n") == .refused(refusal), "\(text.prefix(60).debugDescription), whole")
    }

    @Test func aBadFieldLineOfAResponseIsRefusedBeforeTheHeadEnds() {
        #expect(parse("HTTP/1.1 200 OK\r\nServer: t\r\nBad Name: x\r\n", responses) == .refused(.badFieldName))
    }

    /// Heads sent a byte at a time, with one `Search` across the calls: a
    /// good head is incomplete until its last byte and then read as it is
    /// read whole; a bad one is refused at the LF of its first bad line,
    /// with the reason its whole reading gives. A line that does not end
    /// in CRLF is left to the whole head's reading.
    @Test func headsSentAByteAtATimeAreJudgedLineByLineAsTheWholeHead() {
        let heads = [
            "GET /a HTTP/1.1\r\nHost: a\r\nX-Long: \(String(repeating: "x", count: 300))\r\nY: b\r\n\r\n",
            "GET /a HTTP/1.1\r\nHost: a\r\nBad Name: b\r\nY: c\r\n\r\n",
            "GET /a HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
            "GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\n\r\n",
            "GET /a HTTP/1.1\r\nA: \(String(repeating: "x", count: 1500))\r\nB: \(String(repeating: "y", count: 600))\r\n\r\n",
        ]
        for text in heads {
            let bytes = Array(text.utf8)
            let whole = bytes.withUnsafeBytes { requests.parse($0) }
            var search = HeadParser.Search()
            var judged: (cut: Int, outcome: HeadParser.Outcome)?
            for cut in 1...bytes.count where judged == nil {
                let outcome = bytes[0..<cut].withUnsafeBytes { requests.parse($0, search: &search) }
                if outcome != .incomplete { judged = (cut, outcome) }
            }
            #expect(judged?.outcome == whole, "\(text.prefix(40).debugDescription)")
            switch whole {
            case .head:
                #expect(judged?.cut == bytes.count)
            case .refused:
                #expect((judged?.cut ?? 0) < bytes.count, "\(text.prefix(40).debugDescription) was refused only at its end")
            case .incomplete:
                Issue.record("a whole head was incomplete")
            }
        }
        // Where the early reading stops (a line ended by a bare LF), the bad
        // line after it waits for the head's end, which refuses the bare LF.
        let bareLF = Array("GET /a HTTP/1.1\r\nHost: a\nBad Name: c\r\n".utf8)
        #expect(bareLF.withUnsafeBytes { requests.parse($0) } == .incomplete)
    }

    @Test func aGoodStartLineWaitsForTheRestOfTheHead() {
        for text in ["GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: x\r\n", "GET / HTTP/1.1\nHost: x\r\n", "GET / HTT"] {
            guard case .incomplete = parse(text) else {
                Issue.record("\(text.debugDescription) was not left incomplete")
                continue
            }
        }
        guard case .incomplete = parse("HTTP/1.1 200 OK\r\nServer: t\r\n", responses) else {
            Issue.record("a good status line was not left incomplete")
            return
        }
        guard case .refused(.badStatus) = parse("HTTP/1.1 2x0 OK\r\nServer: t\r\n", responses) else {
            Issue.record("a bad status line was not refused at once")
            return
        }
    }

    @Test func aRequestHeadIsReadAsSpansOfItsBytes() throws {
        let text = "GET /a?b=c HTTP/1.1\r\nHost: example.test\r\nAccept:  */* \t\r\nX-Empty:\r\n\r\nbody"
        let head = try #require(readHead(text))
        #expect(head.length == text.utf8.count - 4)
        #expect(piece(text, head.method) == "GET")
        #expect(piece(text, head.target) == "/a?b=c")
        #expect(head.minorVersion == 1)
        #expect(head.fields.map { [piece(text, $0.name), piece(text, $0.value)] }
            == [["Host", "example.test"], ["Accept", "*/*"], ["X-Empty", ""]])
    }

    @Test func aResponseHeadIsReadWithOrWithoutAReasonPhrase() throws {
        let full = "HTTP/1.0 404 Not Found\r\nServer: t\r\n\r\n"
        let withReason = try #require(readHead(full, responses))
        #expect(withReason.status == 404)
        #expect(withReason.minorVersion == 0)
        #expect(piece(full, withReason.reason) == "Not Found")
        let bare = try #require(readHead("HTTP/1.1 204\r\n\r\n", responses))
        #expect(bare.status == 204)
        #expect(bare.reason == .empty)
    }

    @Test func aHeadWithoutItsEndIsIncompleteUntilItsBoundThenTooLarge() {
        #expect(parse("GET / HTTP/1.1\r\nHost: a\r\n") == .incomplete)
        let small = HeadParser(kind: .request, maxFieldBytes: 16, maxFieldCount: 8)
        #expect(parse("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: small.maxHeadBytes), small) == .refused(.tooLarge))
    }

    /// As NIO's decoder does, before the head's end: an upstream that sends
    /// garbage and waits is answered at once, not at its timeout.
    @Test func bytesNoHeadCanHoldAreRefusedBeforeItsEnd() {
        #expect(parse("\u{00}\u{01} not http at all", responses) == .refused(.badVersion))
        #expect(parse("HTTX", responses) == .refused(.badVersion))
        #expect(parse("HTTP/1.1 200 OK\r\nX: a\u{01}", responses) == .refused(.badFieldValue))
        #expect(parse("GXT", requests) == .refused(.unknownMethod))
        #expect(parse("GETS / HTTP/1.1\r\n", requests) == .refused(.unknownMethod))
        #expect(parse("GET /a\u{7F}", requests) == .refused(.badFieldValue))
        // A valid head's every prefix is only incomplete.
        let valid = "M-SEARCH * HTTP/1.1\r\nHost: a\r\nX: caf\u{E9}\t\r\n"
        for cut in 1...valid.utf8.count {
            #expect(Array(valid.utf8.prefix(cut)).withUnsafeBytes { requests.parse($0) } == .incomplete, "cut at \(cut)")
        }
        let response = "HTTP/1.1 200 OK\r\nServer: t\r\n"
        for cut in 1...response.utf8.count {
            #expect(Array(response.utf8.prefix(cut)).withUnsafeBytes { responses.parse($0) } == .incomplete, "cut at \(cut)")
        }
    }

    @Test func anEndSearchedInPiecesIsFoundOnce() {
        let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        var search = HeadParser.Search()
        for cut in 1..<bytes.count {
            let outcome = bytes[0..<cut].withUnsafeBytes { requests.parse($0, search: &search) }
            #expect(outcome == .incomplete, "cut at \(cut)")
            #expect(search.searchedTo <= cut)
        }
        let whole = bytes.withUnsafeBytes { requests.parse($0, search: &search) }
        guard case .head(let head) = whole else {
            Issue.record("the whole head was not read: \(whole)")
            return
        }
        #expect(head.length == bytes.count)
    }

    @Test(arguments: [
        ("GXT / HTTP/1.1\r\n\r\n", HeadRefusal.unknownMethod),
        ("get / HTTP/1.1\r\n\r\n", .unknownMethod),
        ("GET  / HTTP/1.1\r\n\r\n", .badTarget),
        ("GET /a b HTTP/1.1\r\n\r\n", .badVersion),
        ("GET /\u{7F} HTTP/1.1\r\n\r\n", .badTarget),
        ("GET /é HTTP/1.1\r\n\r\n", .badTarget),
        ("GET / HTTP/1.2\r\n\r\n", .badVersion),
        ("GET / HTTP/2.0\r\n\r\n", .badVersion),
        ("GET / http/1.1\r\n\r\n", .badVersion),
        ("GET / HTTP/1.1 \r\n\r\n", .badVersion),
        ("GET / HTTP/1.1\r\nHost : a\r\n\r\n", .badFieldName),
        ("GET / HTTP/1.1\r\n: a\r\n\r\n", .badFieldName),
        ("GET / HTTP/1.1\r\nHo\"st: a\r\n\r\n", .badFieldName),
        ("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", .foldedLine),
        ("GET / HTTP/1.1\r\nHost: a\u{01}b\r\n\r\n", .badFieldValue),
        ("GET / HTTP/1.1\r\nHost: a\0\r\n\r\n", .badFieldValue),
        ("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", .bareLineEnd),
        ("GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", .bareLineEnd),
        ("GET / HTTP/1.1\nHost: a\r\n\r\n", .bareLineEnd),
    ])
    func refusesWhatNIORefusesOrMore(text: String, refusal: HeadRefusal) {
        #expect(parse(text) == .refused(refusal), "\(text.debugDescription)")
    }

    @Test func refusesAStatusThatIsNotThreeDigits() {
        #expect(parse("HTTP/1.1 20 OK\r\n\r\n", responses) == .refused(.badStatus))
        #expect(parse("HTTP/1.1 099 Low\r\n\r\n", responses) == .refused(.badStatus))
        #expect(parse("HTTP/1.1 200 O\u{01}K\r\n\r\n", responses) == .refused(.badReason))
    }

    @Test func countsTargetNamesAndValuesAgainstTheLimitAsNIODoes() {
        let parser = HeadParser(kind: .request, maxFieldBytes: 10, maxFieldCount: 8)
        // "/" + "Ab" + "cdefg  " = 10 counted bytes: the spaces before a value
        // are not counted, those after it are (as NIO counts).
        #expect(readHead("GET / HTTP/1.1\r\nAb:    cdefg  \r\n\r\n", parser)?.countedBytes == 10)
        #expect(parse("GET / HTTP/1.1\r\nAb: cdefgh  \r\n\r\n", parser) == .refused(.tooLarge))
        #expect(parse("GET / HTTP/1.1\r\nAb: cdefghij\r\n\r\n", parser) == .refused(.tooLarge))
    }

    @Test func refusesOneFieldMoreThanTheLimit() {
        let eight = String(repeating: "X: y\r\n", count: 8)
        #expect(readHead("GET / HTTP/1.1\r\n" + eight + "\r\n") != nil)
        #expect(parse("GET / HTTP/1.1\r\n" + eight + "X: y\r\n\r\n") == .refused(.tooManyFields))
    }

    @Test func knowsEveryMethodNIOKnowsAndNoOther() {
        #expect(readHead("CONNECT a.test:443 HTTP/1.1\r\n\r\n") != nil)
        #expect(readHead("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n") != nil)
        for target in ["/", ":443", "a.test", "a.test:", "a.test:123456", "a.test:44x", "a/b:443"] {
            #expect(parse("CONNECT \(target) HTTP/1.1\r\n\r\n") == .refused(.badTarget), "\(target)")
        }
        for method in ["DELETE", "GET", "HEAD", "POST", "PUT", "OPTIONS", "TRACE", "PATCH", "M-SEARCH", "QUERY", "PROPFIND"] {
            #expect(readHead("\(method) / HTTP/1.1\r\n\r\n") != nil, "\(method)")
        }
        for method in ["PRI", "BREW", "DESCRIBE", "GETS", "G", "QUERYX"] {
            #expect(parse("\(method) / HTTP/1.1\r\n\r\n") == .refused(.unknownMethod), "\(method)")
        }
    }
}
