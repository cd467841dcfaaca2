import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// `UpstreamHTTP2StreamAdapter` on an `EmbeddedChannel`: an exchange's
/// request parts in, an upstream stream's frame payloads out; the server's
/// frames in, response parts out to the exchange (through the stream's
/// `UpstreamHTTPHandler`, which the adapter calls itself).
@Suite("Upstream HTTP/2 stream adapter")
struct UpstreamHTTP2StreamAdapterTests {
    /// A stream's adapter and its handler, as `UpstreamHTTP2Pipeline` makes them.
    static func adapter() -> UpstreamHTTP2StreamAdapter {
        UpstreamHTTP2StreamAdapter(handler: UpstreamHTTPHandler(ready: nil, usesTLS: false))
    }

    /// What reaches the exchange: each part described, and how the stream ended for it.
    final class Exchange: UpstreamResponseReceiver {
        var parts: [String] = []
        var closed: [String] = []
        func upstreamReceived(_ part: UpstreamResponsePart) {
            switch part {
            case .head(let received):
                let head = received.head
                let fields = head.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
                parts.append("head(\(head.status.code) \(fields))")
            case .body(let body): parts.append("body(\(body.readableBytes))")
            case .end(nil): parts.append("end")
            case .end(let trailers?): parts.append("end(\(trailers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")))")
            }
        }
        func upstreamReadComplete() {}
        func upstreamWritabilityChanged() {}
        func upstreamClosed(_ error: (any Error)?) { closed.append(error.map { "\($0)" } ?? "closed") }
    }
    static func request(_ method: HTTPMethod, _ fields: [(String, String)] = [("Host", "u.test")]) -> HTTPClientRequestPart {
        .head(HTTPRequestHead(version: .http1_1, method: method, uri: "/p?q=1", headers: HTTPHeaders(fields)))
    }

    static func describe(_ frame: HTTP2Frame.FramePayload) -> String { StreamAdapterFrames.describe(frame) }

    /// Writes `parts` (flushing after those listed), returns the frames that left.
    static func frames(_ parts: [HTTPClientRequestPart], flushAfter: Set<Int> = []) throws -> [String] {
        try StreamAdapterFrames.written(by: Self.adapter(), parts, flushAfter: flushAfter)
    }

    static func body(_ count: Int) -> HTTPClientRequestPart { .body(.byteBuffer(ByteBuffer(repeating: 0x61, count: count))) }

    // MARK: Request

    @Test func aBodilessRequestIsOneHeadersFrameWithHostAsItsAuthority() throws {
        #expect(try Self.frames([Self.request(.GET, [("Host", "u.test"), ("Accept", "*/*"), ("Connection", "keep-alive")]), .end(nil)])
                == ["HEADERS(:path=/p?q=1,:method=GET,:scheme=https,:authority=u.test,accept=*/*)+END"])
    }

    @Test func theLastBodyFrameCarriesEndStream() throws {
        #expect(try Self.frames([Self.request(.POST), Self.body(3), Self.body(2), .end(nil)])
                == ["HEADERS(:path=/p?q=1,:method=POST,:scheme=https,:authority=u.test)", "DATA(3)", "DATA(2)+END"])
        // Flushed before its end: the end goes as an empty DATA frame.
        #expect(try Self.frames([Self.request(.POST), Self.body(3), .end(nil)], flushAfter: [1])
                == ["HEADERS(:path=/p?q=1,:method=POST,:scheme=https,:authority=u.test)", "DATA(3)", "DATA(0)+END"])
    }

    @Test func trailersEndTheStream() throws {
        #expect(try Self.frames([Self.request(.POST), Self.body(1), .end(HTTPHeaders([("Grpc-Timeout", "1S")]))])
                == ["HEADERS(:path=/p?q=1,:method=POST,:scheme=https,:authority=u.test)", "DATA(1)", "HEADERS(grpc-timeout=1S)+END"])
    }

    @Test(arguments: [[("Accept", "*/*")], [("Host", "a.test"), ("host", "b.test")]])
    func aHeadWithoutExactlyOneHostIsRefused(fields: [(String, String)]) throws {
        let channel = EmbeddedChannel(handler: Self.adapter())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.write(Self.request(.GET, fields), promise: written)
        #expect(throws: HTTP2HeaderBlocks.Malformed.requestWithoutHost) { try written.futureResult.wait() }
        #expect(try channel.readOutbound(as: HTTP2Frame.FramePayload.self) == nil)
    }

    // MARK: Response

    /// Sends `request`, then feeds the server's `payloads`; returns the
    /// parts that reached the exchange, described. None go on down the
    /// pipeline: the adapter is the stream's only handler.
    static func response(to method: HTTPMethod, _ payloads: [HTTP2Frame.FramePayload]) throws -> [String] {
        let adapter = Self.adapter()
        let exchange = Exchange()
        adapter.handler.receiver = exchange
        let channel = EmbeddedChannel(handler: adapter)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.writeOutbound(Self.request(method))
        for payload in payloads { try channel.writeInbound(payload) }
        #expect(try channel.readInbound(as: UpstreamResponsePart.self) == nil)
        #expect(exchange.closed.isEmpty)
        return exchange.parts
    }

    static func headers(_ fields: [(String, String)], end: Bool = false) -> HTTP2Frame.FramePayload {
        .headers(.init(headers: HPACKHeaders(fields), endStream: end))
    }

    static func data(_ count: Int, end: Bool = false) -> HTTP2Frame.FramePayload {
        .data(.init(data: .byteBuffer(ByteBuffer(repeating: 0x61, count: count)), endStream: end))
    }

    @Test func aResponseIsHeadBodyAndEndFramedAsNIOsCodecFramedIt() throws {
        #expect(try Self.response(to: .GET, [Self.headers([(":status", "200"), ("content-length", "3")]), Self.data(3, end: true)])
                == ["head(200 content-length=3)", "body(3)", "end"])
        // No length: chunked for the exchange; a head that ends the stream: length 0.
        #expect(try Self.response(to: .GET, [Self.headers([(":status", "200")]), Self.data(2), Self.data(0, end: true)])
                == ["head(200 transfer-encoding=chunked)", "body(2)", "end"])
        #expect(try Self.response(to: .GET, [Self.headers([(":status", "200")], end: true)]) == ["head(200 content-length=0)", "end"])
        // Bodiless by status or method: nothing added.
        #expect(try Self.response(to: .GET, [Self.headers([(":status", "204")], end: true)]) == ["head(204 )", "end"])
        #expect(try Self.response(to: .HEAD, [Self.headers([(":status", "200")], end: true)]) == ["head(200 )", "end"])
    }

    @Test func informationalHeadsComeFirstAndTrailersEnd() throws {
        #expect(try Self.response(to: .POST, [Self.headers([(":status", "100")]), Self.headers([(":status", "200"), ("content-length", "1")]),
                                               Self.data(1), Self.headers([("grpc-status", "0")], end: true)])
                == ["head(100 )", "head(200 content-length=1)", "body(1)", "end(grpc-status=0)"])
    }

    /// The exchange is told the stream failed, with why, and gets no part;
    /// the stream is closed (reset).
    @Test func aStatusThatIsNotThreeDigitsIsAnError() throws {
        let adapter = Self.adapter()
        let exchange = Exchange()
        adapter.handler.receiver = exchange
        let channel = EmbeddedChannel(handler: adapter)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeOutbound(Self.request(.GET))
        try channel.writeInbound(Self.headers([(":status", "2x0")], end: true))
        #expect(exchange.parts.isEmpty)
        #expect(exchange.closed == ["\(HTTP2HeaderBlocks.Malformed.invalidStatus)"])
        #expect(!channel.isActive)
    }

    /// A response part with no exchange to take it (it let go) ends the
    /// stream rather than wait for an exchange it could be mistaken for.
    @Test func aResponseNobodyHoldsClosesTheStream() throws {
        let channel = EmbeddedChannel(handler: Self.adapter())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeOutbound(Self.request(.GET))
        try channel.writeInbound(Self.headers([(":status", "200")], end: true))
        #expect(!channel.isActive)
    }

    /// The stream's end reaches the exchange through the adapter.
    @Test func theStreamsCloseReachesItsExchange() throws {
        let adapter = Self.adapter()
        let exchange = Exchange()
        adapter.handler.receiver = exchange
        var poolTold = false
        adapter.handler.onClose = { poolTold = true }
        let channel = EmbeddedChannel(handler: adapter)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.close().wait()
        // The handlers leave on the loop's next turn; the loop holds the
        // channel until then.
        channel.embeddedEventLoop.run()
        #expect(exchange.closed == ["closed"])
        #expect(poolTold)
    }
}
