import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import PinproxyServer

/// `HTTP2RequestFramer` on an `EmbeddedChannel`: what the exchange receives
/// for each shape an HTTP/2 stream's head and body can take.
@Suite("HTTP/2 request framer")
struct HTTP2RequestFramerTests {
    static func head(_ method: HTTPMethod, _ headers: [(String, String)] = []) -> HTTPServerRequestPart {
        .head(HTTPRequestHead(version: .init(major: 2, minor: 0), method: method, uri: "/x",
                              headers: HTTPHeaders([("host", "a.test")] + headers)))
    }

    /// Feeds `parts`, returns what came out, described ("head(te)", "body(3)", "end").
    static func run(_ parts: [HTTPServerRequestPart], advance: TimeAmount? = nil) throws -> [String] {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: HTTP2RequestFramer(idleTimeout: .seconds(5)), loop: loop)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        for part in parts { try channel.writeInbound(part) }
        if let advance { loop.advanceTime(by: advance) }
        var out: [String] = []
        while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head(let head):
                let framing = head.headers["transfer-encoding"].first.map { " te=\($0)" } ?? (head.headers["content-length"].first.map { " cl=\($0)" } ?? "")
                out.append("head(\(head.method.rawValue)\(framing))")
            case .body(let body): out.append("body(\(body.readableBytes))")
            case .end: out.append("end")
            }
        }
        return out
    }

    static func body(_ count: Int) -> HTTPServerRequestPart { .body(ByteBuffer(repeating: 0x61, count: count)) }

    @Test func aHeadThatFramesNothingWaitsForTheStreamsEnd() throws {
        #expect(try Self.run([Self.head(.GET)]) == [])
        #expect(try Self.run([Self.head(.GET), .end(nil)]) == ["head(GET)", "end"])
    }

    @Test(arguments: [HTTPMethod.GET, .HEAD, .DELETE, .TRACE])
    func aBodyAfterSuchAHeadIsFramedChunked(method: HTTPMethod) throws {
        #expect(try Self.run([Self.head(method), Self.body(3), Self.body(2), .end(nil)])
                == ["head(\(method.rawValue) te=chunked)", "body(3)", "body(2)", "end"])
    }

    @Test func emptyDataFramesSayNothing() throws {
        #expect(try Self.run([Self.head(.GET), Self.body(0), .end(nil)]) == ["head(GET)", "end"])
        #expect(try Self.run([Self.head(.GET), Self.body(0), Self.body(1), .end(nil)]) == ["head(GET te=chunked)", "body(1)", "end"])
    }

    @Test func aFramedHeadPassesAtOnce() throws {
        #expect(try Self.run([Self.head(.POST, [("content-length", "3")])]) == ["head(POST cl=3)"])
        #expect(try Self.run([Self.head(.POST, [("transfer-encoding", "chunked")]), Self.body(1)]) == ["head(POST te=chunked)", "body(1)"])
    }

    @Test func aStalledStreamsHeadGoesOnChunkedAfterTheIdleTimeout() throws {
        #expect(try Self.run([Self.head(.GET)], advance: .seconds(4)) == [])
        #expect(try Self.run([Self.head(.GET)], advance: .seconds(5)) == ["head(GET te=chunked)"])
    }
}
