import NIOHPACK
import NIOHTTP1
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// An app's HTTP/2 request inside an intercepted session routed on its
/// header block and sent to an HTTP/2 upstream as that block, edited
/// (`RequestRouter.routeBlock`, `ForwardedRequestBlock`), against the way
/// every such request went before: made whole as NIO's HTTP/1 codec made
/// it, routed, edited by `MessageRules.upstreamHead`, turned back into a
/// block (`HTTP2HeaderBlocks.requestBlock`). The upstream must get the same
/// fields (or the same refusal), and the exchange the same decision, before
/// and after a credential's header is put in.
@Suite("HTTP/2 requests forwarded as their blocks")
struct ForwardedRequestBlockTests {
    static let snapshot = ForwardedRequestTests.snapshot

    static func session(_ host: String) -> RequestRouter.Interception {
        ForwardedRequestTests.session(host)
    }

    /// Fields an HTTP/2 app sends, and some only a stream fed without NIO's
    /// validation could carry (connection-specific ones, capitals).
    static let fieldPool: [(String, String)] = [
        ("accept", "*/*"), ("user-agent", "grpc-go/1.60"), ("te", "trailers"), ("te", "gzip"), ("x-foo", "1"), ("x-bar", "2"),
        ("authorization", "Bearer app"), ("proxy-authorization", "Basic eA=="), ("content-type", "application/grpc"),
        ("x-seen", "no"), ("via", "2 other"), ("x-empty", ""), ("cookie", "a=b"), ("accept-encoding", "gzip, br"),
        ("keep-alive", "timeout=5"), ("trailer", "grpc-status"), ("X-Capital", "1"), ("connection", "x-foo"),
        ("upgrade", "h2c"), ("transfer-encoding", "chunked"),
    ]

    @Test func seededBlocksGoUpAsTheWholeHeadWentUp() throws {
        var random = SplitMix(seed: 0xB10C_0A33)
        let methods = ["GET", "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT"]
        let paths = ["/", "/v1/me?x=1", "/pkg.Service/Method", "*", "https://plain.test/abs", "relative"]
        var asBlocks = 0
        for round in 0..<1_200 {
            let host = random.next() % 2 == 0 ? "plain.test" : "rules.test"
            var block = HPACKHeaders()
            block.add(name: ":method", value: methods[random.below(methods.count)])
            block.add(name: ":scheme", value: "https")
            block.add(name: ":path", value: paths[random.below(paths.count)])
            let authority = [host, "\(host):443", "elsewhere.test", nil][random.below(4)]
            if let authority { block.add(name: ":authority", value: authority) }
            for _ in 0..<random.below(7) {
                let (name, value) = Self.fieldPool[random.below(Self.fieldPool.count)]
                block.add(name: name, value: value, indexing: random.next() % 4 == 0 ? .neverIndexed : .indexable)
            }
            switch random.next() % 4 {
            case 0: block.add(name: "content-length", value: "\(random.below(100))")
            case 1: block.add(name: "content-length", value: "5, 6")
            default: break
            }
            if authority == nil || random.next() % 10 == 0 { block.add(name: "host", value: random.next() % 8 == 0 ? "elsewhere.test" : host) }
            let endStream = random.next() % 2 == 0
            guard var app = try? AppRequestBlock(block, endStream: endStream) else { continue }  // reset: no exchange sees it
            if !endStream && app.framesNothing && random.next() % 2 == 0 { app.frameChunked() }  // a body followed

            let asBlock = RequestRouter.route(.block(app), interception: Self.session(host), snapshot: Self.snapshot, maxHeadBytes: 65_536)
            let asWhole = RequestRouter.route(app.whole, interception: Self.session(host), snapshot: Self.snapshot, maxHeadBytes: 65_536)
            let label = "round \(round): \(block) end=\(endStream)"
            #expect(ForwardedRequestTests.describe(asBlock) == ForwardedRequestTests.describe(asWhole), "\(label)")
            #expect(AppRequestHead.block(app).isKeepAlive == app.whole.isKeepAlive, "\(label)")
            guard case .success(let routeBlock) = asBlock.result, case .success(let routeWhole) = asWhole.result else { continue }
            guard routeBlock.upstreamHead.block != nil else { continue }
            asBlocks += 1
            #expect(routeBlock.upstreamHead.whole == routeWhole.upstreamHead.whole, "\(label)")
            #expect(Self.sent(routeBlock.upstreamHead) == Self.sent(routeWhole.upstreamHead), "\(label)")
            // A credential's header, as the token machinery puts it in.
            var tokenBlock = routeBlock.upstreamHead, tokenWhole = routeWhole.upstreamHead
            for edited in [0, 1] {
                let header = ["Authorization", "X-Api-Key", "Connection"][random.below(3)]
                if edited == 0 {
                    tokenBlock.remove(name: header); tokenWhole.remove(name: header)
                } else {
                    tokenBlock.replaceOrAdd(name: header, value: "Bearer fresh"); tokenWhole.replaceOrAdd(name: header, value: "Bearer fresh")
                }
                #expect(Self.sent(tokenBlock) == Self.sent(tokenWhole), "\(label), \(header) edited")
            }
        }
        #expect(asBlocks > 250, "most HTTP/2 requests are forwarded as their blocks: \(asBlocks) of 1,200")
    }

    /// The listed shapes that are not the common one go the whole way.
    @Test func onlyTheCommonShapeIsForwardedAsABlock() throws {
        func upstream(_ fields: [(String, String)], method: String = "GET", path: String = "/v1",
                      authority: String? = "plain.test") throws -> UpstreamRequestHead? {
            var block = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", path)])
            if let authority { block.add(name: ":authority", value: authority) }
            for (name, value) in fields { block.add(name: name, value: value) }
            let app = try AppRequestBlock(block, endStream: true)
            let decision = RequestRouter.route(.block(app), interception: Self.session("plain.test"), snapshot: Self.snapshot,
                                               maxHeadBytes: 65_536)
            return try? decision.result.get().upstreamHead
        }
        #expect(try upstream([("accept", "*/*")])?.block != nil)
        #expect(try upstream([], method: "OPTIONS", path: "*")?.block != nil, "asterisk-form")
        #expect(try upstream([("host", "plain.test")], authority: nil)?.block != nil, "a host field without :authority")
        #expect(try upstream([("connection", "x-foo")])?.wholeHead != nil, "a Connection field names more to drop")
        #expect(try upstream([("upgrade", "h2c")])?.wholeHead != nil, "an Upgrade field")
        #expect(try upstream([], path: "https://plain.test/v1")?.wholeHead != nil, "absolute-form")
        #expect(try upstream([], authority: "elsewhere.test") == nil, "refused (421) on the whole path")
        #expect(try upstream([("host", "plain.test"), ("host", "plain.test")]) == nil, "two Hosts: refused")
        #expect(throws: HTTP2HeaderBlocks.Malformed.noAuthority) {
            try upstream([("host", "plain.test"), ("host", "plain.test")], authority: nil)
        }
    }

    /// RFC 7541 §7.1.3: a field the app sent never-indexed goes upstream
    /// never-indexed; what pinproxy adds takes HPACK's default.
    @Test func aFieldSentNeverIndexedGoesOnNeverIndexed() throws {
        var block = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":path", "/v1"), (":authority", "plain.test")])
        block.add(name: "authorization", value: "Bearer app", indexing: .neverIndexed)
        block.add(name: "accept", value: "*/*")
        let decision = RequestRouter.route(.block(try AppRequestBlock(block, endStream: true)), interception: Self.session("plain.test"),
                                           snapshot: Self.snapshot, maxHeadBytes: 65_536)
        let sent = try #require(try decision.result.get().upstreamHead.block).upstreamBlock(scheme: "https")
        let indexing = Dictionary(sent.map { ($0.name, $0.indexable) }, uniquingKeysWith: { first, _ in first })
        #expect(indexing["authorization"] == .neverIndexed)
        #expect(indexing["accept"] == .indexable)
        #expect(indexing["via"] == .indexable)
        #expect(sent.map(\.name) == [":path", ":method", ":scheme", ":authority", "authorization", "accept", "via"])
    }

    /// The fields an HTTP/2 upstream's stream is sent for `head`, as
    /// "name: value" lines, or why none is sent.
    static func sent(_ head: UpstreamRequestHead) -> String {
        do {
            let block = try head.block?.upstreamBlock(scheme: "https") ?? HTTP2HeaderBlocks.requestBlock(head.whole, scheme: "https")
            return block.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
        } catch {
            return "refused: \(error)"
        }
    }
}
