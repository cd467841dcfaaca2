import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1NIO
@testable import PinproxyServer
import PinproxyTestSupport
import Testing

/// An upstream's answer forwarded as its own bytes (`ResponseWriter.writeForwarded`
/// with `MessageRules.withForwardedFields`) against the way it went before:
/// read by NIO's decoder into a head, edited by `MessageRules.clientHead`,
/// written by NIO's server encoder. The app must get the same bytes, and the
/// exchange must read the same status and persistence from either head.
struct ForwardedHeadTests {
    /// Each field a proxy drops or keeps, in the spellings upstreams use.
    static let fieldPool: [(String, String)] = [
        ("Content-Type", "text/plain"), ("Connection", "keep-alive"), ("Connection", "close"), ("connection", "Keep-Alive"),
        ("Connection", "X-Foo, upgrade"), ("connection", "keep-alive, x-bar"), ("Connection", "transfer-encoding"),
        ("Connection", "Content-Length"), ("Connection", " , x-foo ,"), ("X-Foo", "1"), ("x-bar", "2"), ("X-BAR", "3"),
        ("Keep-Alive", "timeout=5"), ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("Trailer", "Expires"),
        ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic realm=x"), ("Proxy-Authorization", "Basic eA=="),
        ("Set-Cookie", "a=b; Path=/"), ("Via", "1.1 other"), ("Retry-After", "3"), ("X-Empty", ""), ("X-Utf8", "caf\u{e9}"),
        ("X-Tab", "a\tb"), ("Date", "Thu, 26 Nov 2026 10:00:00 GMT"),
    ]

    @Test func commonAnswersGoOutAsNIOWroteThem() throws {
        let cases: [(String, HTTPMethod, Bool)] = [
            ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", .GET, false),
            ("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello", .GET, true),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nGrpc-Status: 0\r\n\r\n", .POST, false),
            ("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", .DELETE, false),
            ("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 10\r\n\r\n", .GET, false),
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", .HEAD, false),
            ("HTTP/1.1 200 OK\r\n\r\n", .HEAD, false),
            ("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", .GET, true),
            ("HTTP/1.0 404 Not Found\r\n\r\nmissing", .GET, false),
            ("HTTP/1.1 200 OK\r\n\r\nuntil the close", .GET, false),
            ("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n", .GET, false),
            ("HTTP/1.1 299 Fine Enough\r\nContent-Length: 2\r\n\r\nok", .GET, false),
            ("HTTP/1.1 599 Odd\r\nContent-Length: 2\r\n\r\nok", .GET, false),
            ("HTTP/1.1 200 OK\r\nConnection: X-Secret, Keep-Alive\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\n", .GET, false),
        ]
        for (response, method, closing) in cases {
            guard let both = try Self.both(response, answering: method, closing: closing) else {
                Issue.record("not read by both: \(response.debugDescription)")
                continue
            }
            #expect(both.forwarded == both.remade, "\(response.debugDescription) to \(method), closing: \(closing)")
        }
    }

    /// Seeded mutations: any mix of the pool's fields, statuses, versions,
    /// framings, methods and closings. An answer NIO's decoder refuses, the
    /// head path refuses too; one only the head path refuses (a shape
    /// `HeadDifferentialTests` pins) has nothing to compare.
    @Test func seededMutationsGoOutAsNIOWroteThem() throws {
        var random = SplitMix(seed: 0x5EED_0033)
        let statuses = [200, 201, 204, 206, 301, 304, 400, 401, 404, 418, 429, 500, 502, 299, 599]
        let methods: [HTTPMethod] = [.GET, .HEAD, .POST, .PUT]
        var compared = 0
        for _ in 0..<600 {
            let status = statuses[random.below(statuses.count)]
            let minor = random.next() % 4 == 0 ? 0 : 1
            var fields: [(String, String)] = []
            for _ in 0..<random.below(7) { fields.append(Self.fieldPool[random.below(Self.fieldPool.count)]) }
            let body = "x" + String(repeating: "y", count: random.below(20))
            var framing = ""
            var payload = ""
            switch random.next() % 3 {
            case 0: framing = "Content-Length: \(body.utf8.count)\r\n"; payload = body
            case 1 where minor == 1: framing = "Transfer-Encoding: chunked\r\n"; payload = "\(String(body.utf8.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n"
            default: payload = body  // read to the close
            }
            let method = methods[random.below(methods.count)]
            // A bodiless answer's framing fields stay, its bytes do not: what
            // follows it would be read as the next answer.
            if status == 204 || status == 304 || method == .HEAD { payload = "" }
            let lines = fields.map { "\($0.0): \($0.1)\r\n" }.joined()
            let response = "HTTP/1.\(minor) \(status) Reason\r\n\(lines)\(framing)\r\n\(payload)"
            let closing = random.next() % 2 == 0
            guard let both = try Self.both(response, answering: method, closing: closing) else { continue }
            #expect(both.forwarded == both.remade, "\(response.debugDescription) to \(method), closing: \(closing)")
            // A connection NIO would not reuse, the head path does not either,
            // but for one: the answer to a HEAD with no framing field, which
            // has no body (RFC 9112 §6.3), and NIO's decoder, which decides
            // before it hears the request was a HEAD, reads as running to the
            // close. The head path may reuse less: NIO reads `Proxy-Connection`
            // as `Connection`, and an HTTP/1.0 `keep-alive` beside a `close`
            // as keeping alive.
            let unframedHeadAnswer = method == .HEAD && framing.isEmpty
            #expect(!both.keepAlive.bytes || both.keepAlive.nio || unframedHeadAnswer, "persistence of \(response.debugDescription)")
            let lowered = response.lowercased()
            if !unframedHeadAnswer && !lowered.contains("proxy-connection: keep-alive") && !(lowered.contains("close") && lowered.contains("keep-alive")) {
                #expect(both.keepAlive.bytes == both.keepAlive.nio, "persistence of \(response.debugDescription)")
            }
            compared += 1
        }
        #expect(compared > 400, "most answers are read by both: \(compared) of 600")
    }

    // MARK: Running both ways

    struct Both {
        var forwarded: String
        var remade: String
        var keepAlive: (bytes: Bool, nio: Bool)
    }

    /// Nil when a decoder refused the answer.
    static func both(_ response: String, answering method: HTTPMethod, closing: Bool) throws -> Both? {
        let nioParts = try? parts(of: response, answering: method, decoder: ByteToMessageHandler(HTTPResponseDecoder()), as: HTTPClientResponsePart.self)
        let ourParts = try? parts(of: response, answering: method,
                                  decoder: ByteToMessageHandler(HeadPathDecoder<UpstreamResponseHead>(maxFieldBytes: 80 * 1024, maxFieldCount: 65_534)),
                                  as: UpstreamResponsePart.self)
        guard let nioParts else {
            #expect(ourParts == nil, "the head path reads an answer NIO's decoder refuses: \(response.debugDescription)")
            return nil
        }
        guard let ourParts else { return nil }
        // NIO's server pipeline, as the app's leg was before.
        let nio = EmbeddedChannel()
        defer { _ = try? nio.finish(acceptAlreadyClosed: true) }
        try nio.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try nio.writeInbound(ByteBuffer(string: "\(method.rawValue) / HTTP/1.1\r\nHost: x\r\n\r\n"))
        var nioKeepAlive = false
        for part in nioParts {
            switch part {
            case .head(let head):
                nioKeepAlive = head.isKeepAlive
                try nio.writeOutbound(HTTPServerResponsePart.head(MessageRules.clientHead(from: head, closing: closing)))
            case .body(let body): try nio.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(body)))
            case .end(let trailers): try nio.writeOutbound(HTTPServerResponsePart.end(trailers))
            }
        }
        // The head path's writer, the head forwarded as bytes.
        let writer = ResponseWriter()
        let ours = EmbeddedChannel()
        defer { _ = try? ours.finish(acceptAlreadyClosed: true) }
        try ours.pipeline.syncOperations.addHandlers([ByteToMessageHandler(HTTPRequestDecoder()), writer])
        writer.requestArrived(method)
        var bytesKeepAlive = false
        for part in ourParts {
            switch part {
            case .head(.bytes(let head)):
                bytesKeepAlive = UpstreamResponseHead.bytes(head).isKeepAlive
                MessageRules.withForwardedFields(of: head) { keeps in
                    writer.writeForwarded(head, keeps: keeps, via: Via.wireValue(receivedIn: head.version), closing: closing, promise: nil)
                }
            case .head(.parsed):
                Issue.record("the head path made a whole head")
            case .body(let body): try ours.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(body)))
            case .end(let trailers): try ours.writeOutbound(HTTPServerResponsePart.end(trailers))
            }
        }
        ours.flush()
        return Both(forwarded: try written(ours), remade: try written(nio), keepAlive: (bytesKeepAlive, nioKeepAlive))
    }

    /// The parts an upstream connection's decoder hands on for `response`,
    /// the answer to a request with `method`; the connection closes after
    /// it, so that an answer read to the close ends too.
    static func parts<Part>(of response: String, answering method: HTTPMethod, decoder: some ChannelHandler, as: Part.Type) throws -> [Part] {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([HTTPRequestEncoder(), decoder])
        try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: "/")))
        try channel.writeOutbound(HTTPClientRequestPart.end(nil))
        try channel.writeInbound(ByteBuffer(string: response))
        var parts: [Part] = []
        while let part = try channel.readInbound(as: Part.self) { parts.append(part) }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        while let part = try channel.readInbound(as: Part.self) { parts.append(part) }
        return parts
    }

    static func written(_ channel: EmbeddedChannel) throws -> String {
        var out = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { continue }
            out += String(buffer: buffer)
        }
        return out
    }
}
