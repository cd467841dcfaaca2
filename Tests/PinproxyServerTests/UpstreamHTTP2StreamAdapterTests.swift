import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// `UpstreamHTTP2StreamAdapter` on an `EmbeddedChannel`: an exchange's
/// request parts in, an upstream stream's frame payloads out; the server's
/// frames in, response parts out.
@Suite("Upstream HTTP/2 stream adapter")
struct UpstreamHTTP2StreamAdapterTests {
    static func request(_ method: HTTPMethod, _ fields: [(String, String)] = [("Host", "u.test")]) -> HTTPClientRequestPart {
        .head(HTTPRequestHead(version: .http1_1, method: method, uri: "/p?q=1", headers: HTTPHeaders(fields)))
    }

    static func describe(_ frame: HTTP2Frame.FramePayload) -> String { StreamAdapterFrames.describe(frame) }

    /// Writes `parts` (flushing after those listed), returns the frames that left.
    static func frames(_ parts: [HTTPClientRequestPart], flushAfter: Set<Int> = []) throws -> [String] {
        try StreamAdapterFrames.written(by: UpstreamHTTP2StreamAdapter(), parts, flushAfter: flushAfter)
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
        let channel = EmbeddedChannel(handler: UpstreamHTTP2StreamAdapter())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.write(Self.request(.GET, fields), promise: written)
        #expect(throws: HTTP2HeaderBlocks.Malformed.requestWithoutHost) { try written.futureResult.wait() }
        #expect(try channel.readOutbound(as: HTTP2Frame.FramePayload.self) == nil)
    }

    // MARK: Response

    /// Sends `request`, then feeds the server's `payloads`; returns the parts that came out, described.
    static func response(to method: HTTPMethod, _ payloads: [HTTP2Frame.FramePayload]) throws -> [String] {
        let channel = EmbeddedChannel(handler: UpstreamHTTP2StreamAdapter())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.writeOutbound(Self.request(method))
        for payload in payloads { try channel.writeInbound(payload) }
        var out: [String] = []
        while let part = try channel.readInbound(as: UpstreamResponsePart.self) {
            switch part {
            case .head(let received):
                let head = received.head
                let fields = head.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
                out.append("head(\(head.status.code) \(fields))")
            case .body(let body): out.append("body(\(body.readableBytes))")
            case .end(nil): out.append("end")
            case .end(let trailers?): out.append("end(\(trailers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")))")
            }
        }
        return out
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

    @Test func aStatusThatIsNotThreeDigitsIsAnError() throws {
        let channel = EmbeddedChannel(handler: UpstreamHTTP2StreamAdapter())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.writeOutbound(Self.request(.GET))
        #expect(throws: HTTP2HeaderBlocks.Malformed.invalidStatus) { try channel.writeInbound(Self.headers([(":status", "2x0")], end: true)) }
        #expect(try channel.readInbound(as: UpstreamResponsePart.self) == nil)
    }
}
