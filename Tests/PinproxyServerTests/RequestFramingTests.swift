import NIOHTTP1
@testable import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// pinproxy decides every forwarded request's framing itself: one framing
/// header goes up, whatever the method, the client's `Connection` header or
/// the policy's header rules say.
@Suite("Request framing")
struct RequestFramingTests {
    private func head(_ method: HTTPMethod = .GET, version: HTTPVersion = .http1_1, _ fields: [(String, String)]) -> HTTPRequestHead {
        HTTPRequestHead(version: version, method: method, uri: "/x", headers: HTTPHeaders(fields))
    }

    @Test(arguments: [
        ([("Content-Length", "12")], RequestFraming.length(12)),
        ([("content-length", "0")], RequestFraming.length(0)),
        ([("Transfer-Encoding", "Chunked")], RequestFraming.chunked),
        ([("TRANSFER-ENCODING", " chunked ")], RequestFraming.chunked),
        ([("Host", "a.test")], RequestFraming.none),
    ])
    func framingIsReadWithoutRegardToCase(fields: [(String, String)], expected: RequestFraming) throws {
        #expect(try RequestFraming.of(head(.TRACE, fields)).get() == expected)
    }

    @Test(arguments: [
        [("Content-Length", "5"), ("Transfer-Encoding", "chunked")],
        [("Content-Length", "5"), ("Content-Length", "5")],
        [("Content-Length", "5, 5")],
        [("Content-Length", "+5")],
        [("Content-Length", "0x5")],
        [("Content-Length", "")],
        [("Transfer-Encoding", "gzip, chunked")],
        [("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")],
        [("Content-Length", "5"), ("Connection", "Content-Length")],
        [("Transfer-Encoding", "chunked"), ("Connection", "keep-alive, transfer-encoding")],
        [("Connection", (0..<33).map { "t\($0)" }.joined(separator: ","))],
    ])
    func ambiguousFramingIsRefused(fields: [(String, String)]) {
        #expect(throws: FramingProblem.self) { try RequestFraming.of(head(.POST, fields)).get() }
    }

    @Test func chunkedInAnHTTP10RequestIsRefused() {
        #expect(throws: FramingProblem.self) {
            try RequestFraming.of(head(.POST, version: .http1_0, [("Transfer-Encoding", "chunked")])).get()
        }
    }

    @Test(arguments: [HTTPMethod.GET, .TRACE, .DELETE, .HEAD, .POST])
    func theUpstreamHeadCarriesExactlyTheDecidedFraming(method: HTTPMethod) throws {
        let client = head(method, [("Host", "a.test"), ("Transfer-Encoding", "Chunked"), ("Connection", "x-debug"), ("X-Debug", "1")])
        let framing = try RequestFraming.of(client).get()
        // A policy that tries to set its own length does not change the framing.
        let rules = HeaderRules(set: [HeaderRules.Field(name: "Content-Length", value: "3")], remove: ["Transfer-Encoding"])
        let up = MessageRules.upstreamHead(from: client, target: "/x", hostHeader: "a.test", rules: rules, framing: framing)
        #expect(up.headers["transfer-encoding"] == ["chunked"])
        #expect(up.headers["content-length"].isEmpty)
        #expect(up.headers["x-debug"].isEmpty, "a header the Connection header names is hop-by-hop")
        #expect(up.headers["connection"].isEmpty)
    }

    @Test func aLengthIsWrittenOnceWhateverTheClientSent() throws {
        let client = head(.GET, [("Host", "a.test"), ("content-length", "7")])
        let up = MessageRules.upstreamHead(from: client, target: "/x", hostHeader: "a.test", rules: nil, framing: try RequestFraming.of(client).get())
        #expect(up.headers["content-length"] == ["7"])
        #expect(up.headers["transfer-encoding"].isEmpty)
    }

    @Test(arguments: [
        ("trailers", true), ("Trailers", true), ("deflate, trailers;q=1", true), ("gzip", false), (";", false), ("", false),
    ])
    func teGoesUpOnlyAsTrailers(value: String, kept: Bool) throws {
        let client = head(.POST, [("Host", "a.test"), ("Content-Length", "0"), ("TE", value)])
        let up = MessageRules.upstreamHead(from: client, target: "/x", hostHeader: "a.test", rules: nil, framing: try RequestFraming.of(client).get())
        // gRPC needs `te: trailers` end to end (docs/contract.md §11); any other TE is hop-by-hop.
        #expect(up.headers["te"] == (kept ? ["trailers"] : []))
    }

    @Test func anHTTP2RequestBodyWithoutLengthIsChunkedUpstream() throws {
        // HTTP/2's codec marks a body delimited by END_STREAM as chunked; that is framing, not an HTTP/1.0 error.
        let client = head(.POST, version: HTTPVersion(major: 2, minor: 0), [("host", "a.test"), ("transfer-encoding", "chunked")])
        #expect(try RequestFraming.of(client).get() == .chunked)
    }

    @Test func hopByHopStrippingKeepsEveryOtherFieldInOrder() {
        var headers = HTTPHeaders([("A", "1"), ("Connection", "x-a, X-B"), ("x-a", "2"), ("B", "3"), ("X-b", "4"), ("Keep-Alive", "5"), ("C", "6")])
        MessageRules.stripHopByHop(&headers)
        #expect(headers.map(\.name) == ["A", "B", "C"])
    }

    /// The common heads take the in-place path; whatever the path, the
    /// result is the same as the full strip's.
    @Test(arguments: [
        ([("A", "1"), ("Connection", "keep-alive"), ("B", "2")], ["A", "B"]),
        ([("Connection", "CLOSE"), ("A", "1"), ("connection", "Keep-Alive")], ["A"]),
        ([("A", "1"), ("Connection", "close"), ("Keep-Alive", "timeout=5"), ("B", "2")], ["A", "B"]),
        ([("A", "1"), ("Connection", "keep-alive, x-a"), ("X-A", "2"), ("B", "3")], ["A", "B"]),
        ([("A", "1"), ("Connection", "close"), ("Upgrade", "h2c")], ["A"]),
    ])
    func connectionKeepAliveAndCloseAreStrippedInPlace(fields: [(String, String)], expected: [String]) {
        var headers = HTTPHeaders(fields)
        MessageRules.stripHopByHop(&headers)
        #expect(headers.map(\.name) == expected)
    }

    @Test func theWholeHeadCounts() {
        let tiny = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: HTTPHeaders(Array(repeating: ("a", "b"), count: 1000)))
        // 1000 fields of 2 bytes of name and value are 6,000 bytes on the wire.
        #expect(MessageRules.wireSize(tiny) == 3 + 1 + 12 + 1000 * 6 + 2)
    }

    @Test func everyHopByHopNameIsRecognisedInAnyCase() {
        for name in MessageRules.hopByHop {
            #expect(MessageRules.isHopByHop(name))
            #expect(MessageRules.isHopByHop(name.uppercased()))
        }
        for name in ["Content-Length", "Transfer-Encoding", "Host", "X-Upgrade", "tE2", "Connectionx"] {
            #expect(!MessageRules.isHopByHop(name), "\(name)")
        }
    }
}
