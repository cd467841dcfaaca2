import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1NIO
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// An app's request inside an intercepted session routed on its bytes and
/// forwarded as them, edited (`RequestRouter.routeForwarded`,
/// `ForwardedRequestHead`, `RequestWriter.writeForwarded`), against the way
/// every request went before: made whole, routed, edited by
/// `MessageRules.upstreamHead`, written by NIO's encoder and validator. The
/// upstream must get the same bytes (or the same refusal), and the exchange
/// the same decision, before and after a credential's header is put in.
@Suite("Requests forwarded as their bytes")
struct ForwardedRequestTests {
    /// Policies with no header rules, and with rules that touch what the
    /// strip and the framing touch too.
    static let snapshot = PolicySnapshot.loaded(policies: """
        hosts:
          - match: plain.test
            action: intercept
          - match: rules.test
            action: intercept
            headers:
              set: { X-Seen: "yes", Accept: "application/json", te: "gzip" }
              remove: [X-Foo, User-Agent, Host]
        """, directory: "pinproxy-forwarded-requests")

    static func session(_ host: String) -> RequestRouter.Interception {
        RequestRouter.Interception(host: host, port: 443, policy: snapshot.policy(forHost: host)!)
    }

    /// Each field a proxy drops, keeps or frames by, in the spellings apps use.
    static let fieldPool: [(String, String)] = [
        ("Accept", "*/*"), ("User-Agent", "curl/8.0"), ("Connection", "keep-alive"), ("Connection", "close"),
        ("connection", "X-Foo, keep-alive"), ("Connection", "x-bar"), ("Connection", "TE"), ("Connection", " , x-foo ,"),
        ("Connection", "host"), ("X-Foo", "1"), ("x-bar", "2"), ("X-BAR", "3"), ("Keep-Alive", "timeout=5"),
        ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("te", "gzip, trailers;q=0.5"), ("TE", ";trailers"),
        ("TE", "gzip"), ("Trailer", "Expires"), ("Proxy-Authorization", "Basic eA=="), ("Authorization", "Bearer app"),
        ("authorization", "Basic b3RoZXI="), ("Content-Type", "text/plain"), ("X-Seen", "no"), ("Via", "1.1 other"),
        ("X-Empty", ""), ("X-Tab", "a\tb"), ("Cookie", "a=b; c=d"), ("X-Long", String(repeating: "v", count: 40)),
        ("X-Quote", "\"q\""), ("Accept-Encoding", "gzip, br"),
    ]

    @Test func seededRequestsGoUpAsTheWholeHeadWentUp() throws {
        var random = SplitMix(seed: 0x5EED_0A33)
        let methods: [HTTPMethod] = [.GET, .GET, .POST, .PUT, .DELETE, .HEAD, .OPTIONS, .PATCH]
        let targets = ["/", "/v1/me?x=1", "/a/b/c", "/p?q=\"x\"", "/%7Euser", "/x|y"]
        var forwarded = 0
        for round in 0..<800 {
            let host = random.next() % 2 == 0 ? "plain.test" : "rules.test"
            var head = HTTPRequestHead(version: .init(major: 1, minor: random.next() % 5 == 0 ? 0 : 1),
                                       method: methods[random.below(methods.count)], uri: targets[random.below(targets.count)])
            var fields: [(String, String)] = []
            for _ in 0..<random.below(8) { fields.append(Self.fieldPool[random.below(Self.fieldPool.count)]) }
            switch random.next() % 5 {
            case 0: fields.append(("Content-Length", "\(random.below(100))"))
            case 1: fields.append(("Transfer-Encoding", "chunked"))
            case 2: fields.append(("content-length", "5, 5"))
            default: break
            }
            let hostAt = random.below(fields.count + 1)
            fields.insert((random.next() % 2 == 0 ? "Host" : "host", random.next() % 9 == 0 ? "elsewhere.test" : host), at: hostAt)
            if random.next() % 12 == 0 { fields.append(("Host", host)) }
            head.headers = HTTPHeaders(fields)

            let bytes = AppRequestHead.read(head)
            guard bytes.isBytes else { continue }  // the head path refuses it: no exchange sees it
            let asBytes = RequestRouter.route(bytes, interception: Self.session(host), snapshot: Self.snapshot, maxHeadBytes: 65_536)
            let asWhole = RequestRouter.route(head, interception: Self.session(host), snapshot: Self.snapshot, maxHeadBytes: 65_536)
            let label = "round \(round): \(head)"
            #expect(Self.describe(asBytes) == Self.describe(asWhole), "\(label)")
            #expect(bytes.isKeepAlive == head.isKeepAlive, "\(label)")
            guard case .success(let routeBytes) = asBytes.result, case .success(let routeWhole) = asWhole.result else { continue }
            guard routeBytes.upstreamHead.forwarded != nil else { continue }
            forwarded += 1
            #expect(routeBytes.upstreamHead.whole == routeWhole.upstreamHead.whole, "\(label)")
            #expect(try Self.written(routeBytes.upstreamHead) == Self.written(routeWhole.upstreamHead), "\(label)")
            // A credential's header, as the token machinery puts it in.
            var tokenBytes = routeBytes.upstreamHead, tokenWhole = routeWhole.upstreamHead
            for edited in [0, 1] {
                let header = ["Authorization", "X-Api-Key"][random.below(2)]
                if edited == 0 {
                    tokenBytes.remove(name: header); tokenWhole.remove(name: header)
                } else {
                    tokenBytes.replaceOrAdd(name: header, value: "Bearer fresh"); tokenWhole.replaceOrAdd(name: header, value: "Bearer fresh")
                }
                #expect(try Self.written(tokenBytes) == Self.written(tokenWhole), "\(label), \(header) edited")
            }
        }
        #expect(forwarded > 250, "most common requests are forwarded as their bytes: \(forwarded) of 800")
    }

    /// The listed shapes that are not the common one go the whole way.
    @Test func onlyTheCommonShapeIsForwardedAsBytes() throws {
        func upstream(_ text: String, host: String = "plain.test") -> UpstreamRequestHead? {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let requestLine = lines.removeFirst().split(separator: " ").map(String.init)
            var whole = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: requestLine[0]), uri: requestLine[1])
            for line in lines where !line.isEmpty {
                let parts = line.split(separator: ":", maxSplits: 1).map(String.init)
                whole.headers.add(name: parts[0], value: parts[1].trimmingCharacters(in: .whitespaces))
            }
            let decision = RequestRouter.route(AppRequestHead.read(whole), interception: Self.session(host), snapshot: Self.snapshot,
                                               maxHeadBytes: 65_536)
            return try? decision.result.get().upstreamHead
        }
        func isForwarded(_ head: UpstreamRequestHead?) -> Bool {
            head?.forwarded != nil
        }
        #expect(isForwarded(upstream("GET /v1 HTTP/1.1\nHost: plain.test\nAccept: */*")))
        #expect(!isForwarded(upstream("GET https://plain.test/v1 HTTP/1.1\nHost: plain.test")), "absolute-form")
        #expect(!isForwarded(upstream("GET /socket HTTP/1.1\nHost: plain.test\nUpgrade: websocket\nConnection: Upgrade")), "an upgrade")
        #expect(!isForwarded(upstream("GET /v1 HTTP/1.1\nHost: plain.test\nX-Name: caf\u{e9}")), "a value past ASCII")
        #expect(!isForwarded(upstream("OPTIONS * HTTP/1.1\nHost: plain.test")), "asterisk-form")
        #expect(upstream("GET /v1 HTTP/1.1\nHost: elsewhere.test") == nil, "refused (421) on the whole path")
    }

    // MARK: Both ways

    static func describe(_ decision: RoutingDecision) -> String {
        let result: String
        switch decision.result {
        case .success(let route): result = "route(\(route.plan.host):\(route.plan.port) \(route.framing) ws=\(route.webSocket))"
        case .failure(let error): result = "refused(\(error.code) \(error.detail))"
        }
        return "\(decision.host) \(decision.policy?.metricLabel ?? "-") close=\(decision.closeAfter) \(String(describing: decision.framing)) \(decision.identity ?? "-") \(result)"
    }

    /// The bytes that go up for `head`: a forwarded head by pinproxy's
    /// writer, a whole one by NIO's encoder and validator, as before. Nil:
    /// refused.
    static func written(_ head: UpstreamRequestHead) throws -> String? {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        if let forwarded = head.forwarded {
            let writer = RequestWriter()
            try channel.pipeline.syncOperations.addHandler(writer)
            forwarded.write(to: writer, promise: nil)
        } else {
            var configuration = HTTPRequestEncoder.Configuration()
            configuration.automaticallySetFramingHeaders = false
            try channel.pipeline.syncOperations.addHandlers([HTTPRequestEncoder(configuration: configuration), NIOHTTPRequestHeadersValidator()])
            channel.write(HTTPClientRequestPart.head(head.whole), promise: nil)
        }
        channel.flush()
        do { try channel.throwIfErrorCaught() } catch { return nil }
        var out = ""
        while let part = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = part else { continue }
            out += String(buffer: buffer)
        }
        return out
    }
}

extension UpstreamRequestHead: Equatable {
    public static func == (left: UpstreamRequestHead, right: UpstreamRequestHead) -> Bool { left.whole == right.whole }
}
