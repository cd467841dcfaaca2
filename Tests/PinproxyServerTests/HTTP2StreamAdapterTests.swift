import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// `HTTP2StreamAdapter` on an `EmbeddedChannel`: an app stream's frame
/// payloads in, the exchange's request parts out (and the exchange's
/// response parts in, frame payloads out), for each shape a stream can take.
@Suite("HTTP/2 stream adapter")
struct HTTP2StreamAdapterTests {
    static func headers(_ fields: [(String, String)], end: Bool = false) -> HTTP2Frame.FramePayload {
        .headers(.init(headers: HPACKHeaders(fields), endStream: end))
    }

    static func request(_ method: String, _ extra: [(String, String)] = [], authority: String? = "a.test",
                        end: Bool = false) -> HTTP2Frame.FramePayload {
        var fields = [(":method", method), (":path", "/x"), (":scheme", "https")]
        if let authority { fields.append((":authority", authority)) }
        return headers(fields + extra, end: end)
    }

    static func data(_ count: Int, end: Bool = false) -> HTTP2Frame.FramePayload {
        .data(.init(data: .byteBuffer(ByteBuffer(repeating: 0x61, count: count)), endStream: end))
    }

    /// What came out towards the exchange, described: "head(GET te=chunked)",
    /// "body(3)", "end", "end(trailers: grpc-status=0)".
    static func parts(_ channel: EmbeddedChannel) throws -> [String] {
        var out: [String] = []
        while let part = try channel.readInbound(as: AppRequestPart.self) {
            switch part {
            case .head(let app):
                let head = app.whole
                let framing = head.headers["transfer-encoding"].first.map { " te=\($0)" } ?? (head.headers["content-length"].first.map { " cl=\($0)" } ?? "")
                out.append("head(\(head.method.rawValue)\(framing))")
            case .body(let body): out.append("body(\(body.readableBytes))")
            case .end(nil): out.append("end")
            case .end(let trailers?): out.append("end(trailers: \(trailers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")))")
            }
        }
        return out
    }

    /// Feeds `payloads` into a fresh adapter, returns what reached the exchange.
    static func run(_ payloads: [HTTP2Frame.FramePayload], advance: TimeAmount? = nil) throws -> [String] {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: HTTP2StreamAdapter(idleTimeout: .seconds(5)), loop: loop)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        for payload in payloads { try channel.writeInbound(payload) }
        if let advance { loop.advanceTime(by: advance) }
        return try parts(channel)
    }

    static func head(_ payload: HTTP2Frame.FramePayload) throws -> HTTPRequestHead {
        let channel = EmbeddedChannel(handler: HTTP2StreamAdapter(idleTimeout: .seconds(5)))
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.writeInbound(payload)
        guard case .head(let head)? = try channel.readInbound(as: AppRequestPart.self) else {
            throw ChannelError.inappropriateOperationForState
        }
        return head.whole
    }

    // MARK: Request: HEADERS, DATA, END_STREAM, trailers

    @Test func headersAreTheExchangesHeadWithHostFromTheAuthority() throws {
        let head = try Self.head(Self.request("POST", [("content-length", "3"), ("x-app", "1")], authority: "a.test:8443"))
        #expect(head.method == .POST && head.uri == "/x" && head.version == .http2)
        #expect(head.headers.map { "\($0.name): \($0.value)" } == ["host: a.test:8443", "content-length: 3", "x-app: 1"])
    }

    @Test func dataIsBodyAndEndStreamIsTheEnd() throws {
        #expect(try Self.run([Self.request("POST", [("content-length", "5")]), Self.data(3), Self.data(2, end: true)])
                == ["head(POST cl=5)", "body(3)", "body(2)", "end"])
        #expect(try Self.run([Self.request("POST", [("content-length", "3")]), Self.data(3), Self.data(0, end: true)])
                == ["head(POST cl=3)", "body(3)", "end"])
    }

    @Test func headersThatEndTheStreamAreHeadAndEnd() throws {
        #expect(try Self.run([Self.request("GET", end: true)]) == ["head(GET)", "end"])
        // A method that expects a body, without one: framed as empty, as NIO's codec framed it.
        #expect(try Self.run([Self.request("POST", end: true)]) == ["head(POST cl=0)", "end"])
    }

    @Test func aSecondHeadersBlockIsTheTrailers() throws {
        #expect(try Self.run([Self.request("POST", [("te", "trailers")]), Self.data(4),
                              Self.headers([("grpc-status", "0")], end: true)])
                == ["head(POST te=chunked)", "body(4)", "end(trailers: grpc-status=0)"])
    }

    @Test func nothingReachesTheExchangeAfterTheEnd() throws {
        // NIO's stream state refuses these first; the adapter holds without it (the fuzz target).
        #expect(try Self.run([Self.request("GET", end: true), Self.data(3), Self.headers([("x", "1")], end: true)])
                == ["head(GET)", "end"])
    }

    // MARK: Request: the authority (RFC 9113 §8.3.1)

    @Test func aHostFieldWithoutAuthorityIsTheAuthorityAndABothKeepTheHost() throws {
        let hostOnly = try Self.head(Self.request("GET", [("host", "h.test")], authority: nil, end: true))
        #expect(hostOnly.headers["host"] == ["h.test"])
        let both = try Self.head(Self.request("GET", [("host", "elsewhere.test")], authority: "a.test", end: true))
        #expect(both.headers["host"] == ["elsewhere.test"], "the host field is the one the exchange checks (421)")
    }

    // MARK: Request: a malformed head is refused

    static let malformed: [(String, HTTP2Frame.FramePayload)] = [
        ("no :path", headers([(":method", "GET"), (":scheme", "https"), (":authority", "a.test")], end: true)),
        ("no :method", headers([(":path", "/"), (":scheme", "https"), (":authority", "a.test")], end: true)),
        ("no :scheme", headers([(":method", "GET"), (":path", "/"), (":authority", "a.test")], end: true)),
        ("two :method", headers([(":method", "GET"), (":method", "POST"), (":path", "/"), (":scheme", "https"), (":authority", "a.test")], end: true)),
        ("space in :path", headers([(":method", "GET"), (":path", "/a HTTP/1.1"), (":scheme", "https"), (":authority", "a.test")], end: true)),
        ("CR LF in :path", headers([(":method", "GET"), (":path", "/a\r\nx: y"), (":scheme", "https"), (":authority", "a.test")], end: true)),
        ("neither :authority nor host", request("GET", authority: nil, end: true)),
        ("two hosts, no :authority", request("GET", [("host", "a.test"), ("host", "b.test")], authority: nil, end: true)),
    ]

    @Test(arguments: malformed.indices)
    func aMalformedHeadIsAnErrorAndNothingReachesTheExchange(index: Int) throws {
        let (name, payload) = Self.malformed[index]
        let channel = EmbeddedChannel(handler: HTTP2StreamAdapter(idleTimeout: .seconds(5)))
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        #expect(throws: HTTP2HeaderBlocks.Malformed.self, "\(name)") { try channel.writeInbound(payload) }
        try channel.writeInbound(Self.data(3, end: true))
        #expect(try Self.parts(channel) == [], "\(name)")
    }

    // MARK: Request: framing a head that frames nothing (smuggling, docs/contract.md §11)

    @Test func aHeadThatFramesNothingWaitsForTheStreamsEnd() throws {
        #expect(try Self.run([Self.request("GET")]) == [])
        #expect(try Self.run([Self.request("GET"), Self.data(0, end: true)]) == ["head(GET)", "end"])
    }

    @Test(arguments: ["GET", "HEAD", "DELETE", "TRACE"])
    func aBodyAfterSuchAHeadIsFramedChunked(method: String) throws {
        #expect(try Self.run([Self.request(method), Self.data(3), Self.data(2, end: true)])
                == ["head(\(method) te=chunked)", "body(3)", "body(2)", "end"])
    }

    @Test func emptyDataFramesSayNothing() throws {
        #expect(try Self.run([Self.request("GET"), Self.data(0), Self.data(0, end: true)]) == ["head(GET)", "end"])
        #expect(try Self.run([Self.request("GET"), Self.data(0), Self.data(1, end: true)]) == ["head(GET te=chunked)", "body(1)", "end"])
    }

    @Test func aStalledStreamsHeadGoesOnChunkedAfterTheIdleTimeout() throws {
        #expect(try Self.run([Self.request("GET")], advance: .seconds(4)) == [])
        #expect(try Self.run([Self.request("GET")], advance: .seconds(5)) == ["head(GET te=chunked)"])
    }

    // MARK: Response

    /// Writes `parts` (flushing after those listed), returns the frames that left, described.
    static func frames(_ parts: [HTTPServerResponsePart], flushAfter: Set<Int> = []) throws -> [String] {
        try StreamAdapterFrames.written(by: HTTP2StreamAdapter(idleTimeout: .seconds(5)), parts, flushAfter: flushAfter)
    }

    static func response(_ status: HTTPResponseStatus, _ fields: [(String, String)] = []) -> HTTPServerResponsePart {
        .head(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(fields)))
    }

    static func body(_ count: Int) -> HTTPServerResponsePart { .body(.byteBuffer(ByteBuffer(repeating: 0x61, count: count))) }

    @Test func aResponsesLastDataEndsTheStream() throws {
        #expect(try Self.frames([Self.response(.ok, [("Content-Length", "5")]), Self.body(2), Self.body(3), .end(nil)])
                == ["HEADERS(:status=200,content-length=5)", "DATA(2)", "DATA(3)+END"])
    }

    @Test func aFlushBetweenTheLastDataAndTheEndSendsTheDataAlone() throws {
        #expect(try Self.frames([Self.response(.ok, [("Content-Length", "5")]), Self.body(5), .end(nil)], flushAfter: [1])
                == ["HEADERS(:status=200,content-length=5)", "DATA(5)", "DATA(0)+END"])
    }

    @Test func theHeadIsNormalisedForHTTP2() throws {
        // Lowercase names; connection-specific fields, and those `Connection` names, left out.
        #expect(try Self.frames([Self.response(.ok, [("Via", "1.1 pinproxy"), ("Connection", "close, X-Hop"), ("X-Hop", "1"),
                                                     ("Keep-Alive", "5"), ("Transfer-Encoding", "chunked"), ("X-Pinproxy-Error", "e")]),
                                 .end(nil)])
                == ["HEADERS(:status=200,via=1.1 pinproxy,x-pinproxy-error=e)+END"])
    }

    /// Each connection-specific field is left out, and a field that only
    /// looks like one (a name one letter longer, or with a prefix) is kept;
    /// `host` is kept in a response, and `close` goes when `Connection: close` names it.
    @Test func everyConnectionSpecificFieldIsLeftOutAndNoOther() throws {
        #expect(try Self.frames([Self.response(.ok, [("Upgrade", "h2c"), ("Proxy-Connection", "keep-alive"), ("Connection", "close"),
                                                     ("Close", "x"), ("Host", "kept.test"), ("X-Upgrade", "kept"), ("Connections", "kept"),
                                                     ("Keep-Alives", "kept"), ("Transfer-Encodings", "kept")]),
                                 .end(nil)])
                == ["HEADERS(:status=200,host=kept.test,x-upgrade=kept,connections=kept,keep-alives=kept,transfer-encodings=kept)+END"])
    }

    @Test func aHeadFollowedAtOnceByItsEndIsOneHeadersFrameWithEndStream() throws {
        // gRPC's trailers-only answer: the status in the head, nothing after it.
        #expect(try Self.frames([Self.response(.ok, [("grpc-status", "5")]), .end(nil)]) == ["HEADERS(:status=200,grpc-status=5)+END"])
    }

    @Test func aFlushBetweenHeadAndEndSendsTheHeadAlone() throws {
        #expect(try Self.frames([Self.response(.ok), .end(nil)], flushAfter: [0]) == ["HEADERS(:status=200)", "DATA(0)+END"])
    }

    @Test func trailersAreHeadersThatEndTheStream() throws {
        #expect(try Self.frames([Self.response(.ok), Self.body(2), .end(HTTPHeaders([("Grpc-Status", "0")]))])
                == ["HEADERS(:status=200)", "DATA(2)", "HEADERS(grpc-status=0)+END"])
    }

    @Test func anInformationalHeadGoesAtOnce() throws {
        #expect(try Self.frames([Self.response(.continue), Self.response(.noContent), .end(nil)])
                == ["HEADERS(:status=100)", "HEADERS(:status=204)+END"])
    }
}
