import NIOCore
import NIOHTTP1
import PinproxyTestSupport
import Testing

/// The head path's writers (`RequestWriter`, `ResponseWriter`) against NIO's
/// encoders and validators on the same parts: what pinproxy sends and
/// answers, each framing, and seeded mutations of fields, targets, methods,
/// statuses and trailers (`HeadWriterDifferential`).
@Suite struct HeadWriterTests {
    @Test(arguments: [
        [HTTPClientRequestPart.head(requestHead(.GET, "/v1/me", commonFields)), .end(nil)],
        [.head(requestHead(.POST, "/api?x=1&y=%20", commonFields + [("Content-Length", "5")])), .body(.byteBuffer(ByteBuffer(string: "hello"))), .end(nil)],
        [.head(requestHead(.PUT, "/c", commonFields + [("Transfer-Encoding", "chunked")])),
         .body(.byteBuffer(ByteBuffer(string: "abc"))), .body(.byteBuffer(ByteBuffer())), .body(.byteBuffer(ByteBuffer(string: String(repeating: "x", count: 300)))),
         .end(HTTPHeaders([("X-Trailer", "1")]))],
        [.head(requestHead(.PATCH, "/c", [("transfer-encoding", "Chunked")])), .body(.byteBuffer(ByteBuffer(string: "not chunked: the value is not exactly `chunked`"))), .end(nil)],
        [.head(requestHead(.RAW(value: "PURGE-ALL"), "*", [])), .end(nil)],
        [.head(requestHead(.GET, "http://a.test/abs", [], version: .http1_0)), .end(nil),
         .head(requestHead(.HEAD, "/second", [("Transfer-Encoding", "chunked")], version: .http1_0)), .end(nil)],
    ])
    func requestsPinproxySendsAreWrittenAsNIOWritesThem(_ parts: [HTTPClientRequestPart]) throws {
        let (ours, nio) = try HeadWriterDifferential.requests(parts)
        #expect(ours == nio)
        #expect(ours.errors.isEmpty)
    }

    @Test(arguments: ["GET", "HEAD", "CONNECT", "POST"])
    func responsesAreWrittenAsNIOWritesThemForEachMethod(_ method: String) throws {
        let request = method == "CONNECT" ? "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n" : "\(method) / HTTP/1.1\r\nHost: a.test\r\n\r\n"
        let body = HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: "hello")))
        let cases: [[HTTPServerResponsePart]] = [
            [.head(responseHead(.ok, commonFields + [("Content-Length", "5")])), body, .end(nil)],
            [.head(responseHead(.ok, commonFields)), body, .end(nil)],  // no length: chunked by the writer
            [.head(responseHead(.ok, commonFields + [("Transfer-Encoding", "gzip"), ("Content-Length", "5")])), body, .end(nil)],
            [.head(responseHead(.ok, commonFields + [("transfer-encoding", "chunked")])), body, .end(HTTPHeaders([("Grpc-Status", "0")]))],
            [.head(responseHead(.noContent, [("Content-Length", "0"), ("Transfer-Encoding", "chunked")])), .end(nil)],
            [.head(responseHead(.notModified, [("ETag", "\"x\"")])), .end(nil)],
            [.head(responseHead(.continue, [])), .head(responseHead(.ok, [("Content-Length", "5")])), body, .end(nil)],
            [.head(responseHead(.switchingProtocols, [("Upgrade", "websocket"), ("Connection", "Upgrade")])), .end(nil)],
            [.head(responseHead(.custom(code: 299, reasonPhrase: "Fine Enough"), [])), body, .end(nil)],
            [.head(responseHead(.ok, [("Content-Length", "5")], version: .http1_0)), body, .end(nil)],
            [.head(responseHead(.ok, [], version: .http1_0)), body, .end(nil)],  // no length, 1.0: read to the close
            [.head(responseHead(.ok, [], version: HTTPVersion(major: 2, minor: 0))), body, .end(nil)],
        ]
        for parts in cases {
            let (ours, nio) = try HeadWriterDifferential.responses(parts, answering: request)
            #expect(ours == nio, "\(method): \(parts)")
        }
    }

    @Test func refusalsAreNIOsRefusals() throws {
        let bad: [(String, String)] = [("X-Split", "a\r\nInjected: 1"), ("Bad Name", "x"), ("X-Nul", "a\u{0}b"), ("X-Del", "\u{7F}"), ("X:Colon", "y")]
        for field in bad {
            let request = try HeadWriterDifferential.requests([.head(requestHead(.GET, "/", [("Host", "a.test"), field])), .end(nil)])
            #expect(request.head.errors == request.nio.errors && !request.head.errors.isEmpty, "\(field)")
            #expect(request.head.bytes == request.nio.bytes && request.head.writes.first == request.nio.writes.first, "\(field)")
            let response = try HeadWriterDifferential.responses([.head(responseHead(.ok, [field])), .end(nil)], answering: "GET / HTTP/1.1\r\n\r\n")
            #expect(response.head == response.nio, "\(field)")
            let trailers = try HeadWriterDifferential.responses([.head(responseHead(.ok, [])), .end(HTTPHeaders([field]))], answering: "GET / HTTP/1.1\r\n\r\n")
            #expect(trailers.head == trailers.nio, "\(field)")
        }
        for target in ["/a b", "/\r\nX: y", "/caf\u{E9}", "/{x}"] {
            let request = try HeadWriterDifferential.requests([.head(requestHead(.GET, target, [])), .end(nil)])
            #expect(request.head.errors == request.nio.errors && !request.head.errors.isEmpty, "\(target.debugDescription)")
        }
        let method = try HeadWriterDifferential.requests([.head(requestHead(.RAW(value: "GET /"), "/", [])), .end(nil)])
        #expect(method.head.errors == method.nio.errors && !method.head.errors.isEmpty)
        let reason = try HeadWriterDifferential.responses([.head(responseHead(.custom(code: 200, reasonPhrase: "OK\r\nX: y"), [])), .end(nil)], answering: "GET / HTTP/1.1\r\n\r\n")
        #expect(reason.head == reason.nio && !reason.head.errors.isEmpty)
    }

    /// Where the request writer is stricter than NIO: after a refused head,
    /// NIO's encoder would still write the body it was given, headless.
    @Test func aRequestWhoseHeadWasRefusedSendsNothingMore() throws {
        let parts: [HTTPClientRequestPart] = [.head(requestHead(.POST, "/", [("X", "\r\n")])), .body(.byteBuffer(ByteBuffer(string: "secret"))), .end(nil)]
        let (ours, nio) = try HeadWriterDifferential.requests(parts)
        #expect(ours.bytes.isEmpty)
        #expect(String(decoding: nio.bytes, as: UTF8.self) == "secret")
        #expect(ours.writes.allSatisfy { $0 != nil })
    }

    @Test func seededMutationsAreWrittenAndRefusedAsNIODoes() throws {
        var random = SplitMix(seed: 35)
        let alphabet: [UInt8] = Mutation.interesting + Array("aZ09-_".utf8)
        func mutate(_ text: String) -> String {
            var bytes = Array(text.utf8)
            for _ in 0..<(1 + random.below(2)) {
                let byte = alphabet[random.below(alphabet.count)]
                if bytes.isEmpty || random.below(2) == 0 { bytes.insert(byte, at: random.below(bytes.count + 1)) } else { bytes[random.below(bytes.count)] = byte }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        let framings: [[(String, String)]] = [[], [("Content-Length", "3")], [("Transfer-Encoding", "chunked")], [("Transfer-Encoding", "gzip, chunked")]]
        let methods: [HTTPMethod] = [.GET, .HEAD, .POST, .CONNECT, .OPTIONS]
        let statuses: [HTTPResponseStatus] = [.ok, .noContent, .notModified, .continue, .switchingProtocols, .notFound, .custom(code: 299, reasonPhrase: "X")]
        var refusedHeads = 0
        var refusedResponses = 0
        for _ in 0..<1_500 {
            var picked = Array(commonFields.shuffled(using: &random).prefix(1 + random.below(4))) + framings[random.below(framings.count)]
            let victim = random.below(picked.count)
            switch random.below(3) {
            case 0: picked[victim].0 = mutate(picked[victim].0)
            case 1: picked[victim].1 = mutate(picked[victim].1)
            default: break
            }
            let trailers: HTTPHeaders? = random.below(3) == 0 ? HTTPHeaders([(mutate("X-T"), mutate("v"))]) : nil
            let body = ByteBuffer(string: "abc")
            let target = random.below(4) == 0 ? mutate("/p?q=1") : "/p?q=1"
            let version = random.below(5) == 0 ? HTTPVersion.http1_0 : .http1_1
            let request = try HeadWriterDifferential.requests([.head(requestHead(.POST, target, picked, version: version)), .body(.byteBuffer(body)), .end(trailers)])
            #expect(HeadWriterDifferential.agree(request.head, request.nio), "\(target.debugDescription) \(picked) \(String(describing: trailers))")
            refusedHeads += request.nio.writes.first! != nil ? 1 : 0
            let method = methods[random.below(methods.count)]
            let ask = method == .CONNECT ? "CONNECT a.test:443 HTTP/1.1\r\n\r\n" : "\(method.rawValue) / HTTP/1.1\r\n\r\n"
            var status = statuses[random.below(statuses.count)]
            if random.below(6) == 0 { status = .custom(code: 200, reasonPhrase: mutate("Fine")) }
            let bodyParts: [HTTPServerResponsePart] = method == .HEAD || method == .CONNECT ? [] : [.body(.byteBuffer(body))]
            let response = try HeadWriterDifferential.responses([.head(responseHead(status, picked, version: version))] + bodyParts + [.end(trailers)], answering: ask)
            #expect(response.head == response.nio, "\(method) \(status) \(picked) \(String(describing: trailers))")
            refusedResponses += response.nio.errors.isEmpty ? 0 : 1
        }
        // Both kinds of outcome were compared, not only one.
        #expect(refusedHeads > 100 && refusedHeads < 1_400)
        #expect(refusedResponses > 100 && refusedResponses < 1_400)
    }
}

private func requestHead(_ method: HTTPMethod, _ uri: String, _ fields: [(String, String)], version: HTTPVersion = .http1_1) -> HTTPRequestHead {
    HTTPRequestHead(version: version, method: method, uri: uri, headers: HTTPHeaders(fields))
}

private func responseHead(_ status: HTTPResponseStatus, _ fields: [(String, String)], version: HTTPVersion = .http1_1) -> HTTPResponseHead {
    HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields))
}

/// Fields pinproxy sends and answers with, a tab and a byte past ASCII among them.
private let commonFields: [(String, String)] = [
    ("Host", "api.spotify.com"), ("User-Agent", "curl/7.88.1"), ("Accept", "*/*"),
    ("Authorization", "Bearer BQD-abc.def_ghi"), ("Via", "1.1 pinproxy"), ("X-Empty", ""),
    ("Content-Type", "application/json; charset=utf-8"), ("X-Tab", "a\tb"), ("X-High", "caf\u{E9}"),
]

