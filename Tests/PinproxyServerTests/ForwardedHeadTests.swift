import NIOCore
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

    /// Nil when a decoder refused the answer.
    static func both(_ response: String, answering method: HTTPMethod, closing: Bool) throws -> ForwardedHeadDifferential.Outcome? {
        var nioRefusedAlone = false
        let outcome = try ForwardedHeadDifferential.run(
            Array(response.utf8), answering: method, closing: closing,
            remake: { MessageRules.clientHead(from: $0, closing: $1) },
            persists: { UpstreamResponseHead.bytes($0).isKeepAlive },
            forward: { MessageRules.writeForwarded($1, closing: $2, to: $0) },
            nioRefusedAlone: &nioRefusedAlone)
        #expect(!nioRefusedAlone, "the head path reads an answer NIO's decoder refuses: \(response.debugDescription)")
        return outcome
    }
}
