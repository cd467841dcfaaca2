import NIOHPACK
import NIOHTTP1
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// `HTTP2ResponseBlock`: an HTTP/2 upstream's response block forwarded to an
/// HTTP/2 app edited in place must be, field for field, the block the longer
/// way makes (the head made whole, `MessageRules.clientHead`, then
/// `HTTP2HeaderBlocks.responseBlock`), whatever the block holds.
@Suite("HTTP/2 response block")
struct HTTP2ResponseBlockTests {
    /// What the longer way sends for `block`.
    static func madeWhole(_ block: HPACKHeaders, method: HTTPMethod, endStream: Bool, closing: Bool) throws -> [String] {
        let head = try HTTP2ResponseBlock(block, request: method, endStream: endStream).head
        return describe(HTTP2HeaderBlocks.responseBlock(MessageRules.clientHead(from: head, closing: closing)))
    }

    static func forwarded(_ block: HPACKHeaders, method: HTTPMethod, endStream: Bool, closing: Bool) throws -> [String] {
        describe(try HTTP2ResponseBlock(block, request: method, endStream: endStream).forwarded(closing: closing))
    }

    static func describe(_ block: HPACKHeaders) -> [String] {
        block.map { "\($0.name): \($0.value)" }
    }

    static func block(_ status: String, _ fields: [(String, String)]) -> HPACKHeaders {
        HPACKHeaders([(":status", status)] + fields)
    }

    @Test func aCommonAnswerKeepsItsFieldsAndGainsVia() throws {
        let block = Self.block("200", [("content-type", "text/plain"), ("content-length", "5"), ("server", "nginx")])
        let forwarded = try Self.forwarded(block, method: .GET, endStream: false, closing: true)
        #expect(forwarded == [":status: 200", "content-type: text/plain", "content-length: 5", "server: nginx", "via: 2 pinproxy"])
        #expect(forwarded == (try Self.madeWhole(block, method: .GET, endStream: false, closing: true)))
    }

    /// Fields a proxy never forwards, and those HTTP/2 forbids, in any case;
    /// a block with no length gets the one NIO's codec framed it with.
    @Test(arguments: [
        ("200", [("te", "trailers"), ("Trailer", "grpc-status"), ("proxy-authenticate", "Basic"), ("x-a", "1")], false),
        ("200", [("transfer-encoding", "chunked"), ("Upgrade", "h2c"), ("keep-alive", "timeout=5"), ("x-a", "1")], true),
        ("200", [("proxy-connection", "keep-alive"), ("Proxy-Authorization", "Basic eA=="), ("X-Mixed", "Case")], false),
        ("204", [("x-a", "1")], true),
        ("304", [("etag", "\"e\"")], true),
        ("200", [("close", "a field named close"), ("x-a", "1")], false),
        ("200", [("close", "a field named close")], true),
        ("099", [("x-a", "1")], false),
        ("103", [("link", "</s.css>; rel=preload")], false),
        ("404", [], true),
        ("200", [("connection", "close, x-named"), ("x-named", "1"), ("x-kept", "2")], false),
        ("200", [("Connection", "keep-alive"), ("x-kept", "2")], true),
    ] as [(String, [(String, String)], Bool)])
    func anEditedBlockIsTheBlockTheHeadMadeWholeGives(status: String, fields: [(String, String)], endStream: Bool) throws {
        let block = Self.block(status, fields)
        for method in [HTTPMethod.GET, .HEAD, .POST] {
            for closing in [false, true] {
                #expect(try Self.forwarded(block, method: method, endStream: endStream, closing: closing)
                        == (try Self.madeWhole(block, method: method, endStream: endStream, closing: closing)),
                        "\(status) \(fields) \(method) endStream \(endStream) closing \(closing)")
            }
        }
    }

    /// Random blocks from names the rules single out, in random case and
    /// order: the two ways agree on every one (a seeded generator, so a
    /// failure reproduces).
    @Test func randomBlocksAgreeWithTheLongerWay() throws {
        let names = ["te", "trailer", "upgrade", "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
                     "proxy-authorization", "transfer-encoding", "content-length", "close", "host", "via", "x-a", "server"]
        let values = ["close", "keep-alive", "x-a", "chunked", "0", "trailers", "close, x-a", "v"]
        var random = SplitMix(seed: 0x33)
        for _ in 0..<2_000 {
            var fields: [(String, String)] = []
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                var name = names.randomElement(using: &random)!
                if Bool.random(using: &random) { name = String(name.map { Bool.random(using: &random) ? Character($0.uppercased()) : $0 }) }
                fields.append((name, values.randomElement(using: &random)!))
            }
            let block = Self.block(["200", "204", "304", "404"].randomElement(using: &random)!, fields)
            let method = [HTTPMethod.GET, .HEAD, .POST, .CONNECT].randomElement(using: &random)!
            let endStream = Bool.random(using: &random), closing = Bool.random(using: &random)
            #expect(try Self.forwarded(block, method: method, endStream: endStream, closing: closing)
                    == (try Self.madeWhole(block, method: method, endStream: endStream, closing: closing)),
                    "\(fields) \(method) endStream \(endStream) closing \(closing)")
        }
    }

    /// RFC 7541 §7.1.3: a field the upstream sent never-indexed is forwarded
    /// never-indexed (the head made whole forgot it, and indexed it).
    @Test func aNeverIndexedFieldStaysNeverIndexed() throws {
        var block = HPACKHeaders([(":status", "200")])
        block.add(name: "set-cookie", value: "secret=1", indexing: .neverIndexed)
        block.add(name: "content-length", value: "0")
        let forwarded = try HTTP2ResponseBlock(block, request: .GET, endStream: true).forwarded(closing: false)
        #expect(forwarded.map(\.indexable) == [.indexable, .neverIndexed, .indexable, .indexable])
    }

    @Test(arguments: [
        ([("x-a", "1")], HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":status")),
        ([(":status", "20")], .invalidStatus),
        ([(":status", "200"), (":status", "200")], .invalidStatus),
        ([(":status", "2x0")], .invalidStatus),
    ] as [([(String, String)], HTTP2HeaderBlocks.Malformed)])
    func aBlockWithoutOneThreeDigitStatusIsRefused(fields: [(String, String)], refusal: HTTP2HeaderBlocks.Malformed) {
        #expect(throws: refusal) { try HTTP2ResponseBlock(HPACKHeaders(fields), request: .GET, endStream: false) }
    }
}
