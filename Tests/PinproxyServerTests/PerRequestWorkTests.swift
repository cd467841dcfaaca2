import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS
import Testing

@testable import PinproxyServer

/// Work the request path no longer does for every request (issue 33,
/// fourth pass, bench/README.md): each test names one piece and fails if it
/// comes back. What they guard is allocations and locks per request, which
/// only a profile measures; here the shape that avoids them is checked.
@Suite("Per-request work")
struct PerRequestWorkTests {
    // MARK: Routing

    @Test func routingInsideASessionDoesNotReadThePolicyStore() throws {
        let snapshot = SessionRouteCacheTests.snapshot
        var reads = 0
        let decision = RequestRouter.route(SessionRouteCacheTests.head(), interception: SessionRouteCacheTests.session(),
                                           snapshot: { reads += 1; return snapshot }(), maxHeadBytes: 65_536)
        _ = try decision.result.get()
        #expect(reads == 0, "a session's policy was fixed by its CONNECT: the store (a lock and a retain) is not read")
        // On the listener, an absolute-form request is routed by the policies in force: read once.
        var absolute = HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://api.test/v1")
        absolute.headers.add(name: "Host", value: "api.test")
        _ = RequestRouter.route(absolute, interception: nil, snapshot: { reads += 1; return snapshot }(), maxHeadBytes: 65_536)
        #expect(reads == 1)
    }

    /// A session's requests all go to its CONNECT's host under its policy:
    /// the dial plan (with its array of targets) is made once per session.
    @Test func aSessionsRequestsShareOneDialPlan() throws {
        let session = SessionRouteCacheTests.session()
        let first = try SessionRouteCacheTests.route(SessionRouteCacheTests.head(), in: session).result.get().plan
        let second = try SessionRouteCacheTests.route(SessionRouteCacheTests.head("/v1/other"), in: session).result.get().plan
        #expect(first === second, "the second request's plan is the session's, not a new one")
        #expect(second.host == "api.test" && second.port == 443 && second.tls && second.targets.count == 1)
        // Another session (another CONNECT) makes its own.
        let other = try SessionRouteCacheTests.route(SessionRouteCacheTests.head(), in: SessionRouteCacheTests.session()).result.get().plan
        #expect(other !== first)
    }

    /// The plan's pool key is made with the plan (the host lowercased once),
    /// not at each request's checkout; a WebSocket request's key is its own.
    @Test func aPlansPoolKeyIsMadeWithThePlan() throws {
        let policy = try #require(EmbeddedProxy().services.store.snapshot.policy(forHost: "intercept.test"))
        let plan = DialPlan(host: "Intercept-Upstream.Example.TEST", port: 443, tls: true, policy: policy)
        let first = plan.poolKey, second = plan.poolKey
        #expect(first.host == "intercept-upstream.example.test" && first.digest == policy.digest && !first.http1Only)
        #expect(Self.storage(first.host) == Self.storage(second.host), "one key, not a lowercased host per checkout")
        let http1 = plan.requiringHTTP1().poolKey
        #expect(http1.http1Only && http1 != first)
        #expect(http1.host == first.host && http1.port == first.port && http1.tls == first.tls && http1.digest == first.digest)
    }

    /// Where a string's bytes are stored (a host longer than a small string).
    static func storage(_ text: String) -> UnsafePointer<UInt8>? {
        text.utf8.withContiguousStorageIfAvailable { $0.baseAddress } ?? nil
    }

    // MARK: Heads

    /// The address of a head's storage box (its first stored property).
    static func box<Head>(_ head: Head) -> UInt {
        withUnsafeBytes(of: head) { $0.load(as: UInt.self) }
    }

    static func fields(_ headers: HTTPHeaders) -> [String] {
        headers.map { "\($0.name): \($0.value)" }
    }

    @Test func anOriginFormRequestGoesUpInTheAppsHeadNotANewOne() throws {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/v1?x=1")
        head.headers.add(name: "Host", value: "a.test")
        head.headers.add(name: "Accept", value: "*/*")
        let up = MessageRules.upstreamHead(from: head, target: "/v1?x=1", hostHeader: "a.test", rules: nil, framing: .none)
        #expect(Self.box(up) == Self.box(head), "method, target and version stay in the app head's box")
        #expect(Self.fields(up.headers) == ["Host: a.test", "Accept: */*", "Via: 1.1 pinproxy"])
        #expect(Self.fields(head.headers) == ["Host: a.test", "Accept: */*"], "the app's head is not changed")
        // A target or version that changes gets a box of its own; the app's head keeps its own.
        var absolute = HTTPRequestHead(version: .http1_0, method: .GET, uri: "http://a.test/v1")
        absolute.headers.add(name: "Host", value: "a.test")
        let rewritten = MessageRules.upstreamHead(from: absolute, target: "/v1", hostHeader: "a.test", rules: nil, framing: .none)
        #expect(rewritten.uri == "/v1" && rewritten.version == .http1_1 && rewritten.method == .GET)
        #expect(absolute.uri == "http://a.test/v1" && absolute.version == .http1_0)
        #expect(Self.fields(rewritten.headers) == ["Host: a.test", "Via: 1.0 pinproxy"])
    }

    @Test func aResponseGoesToTheAppInTheUpstreamsHeadNotANewOne() {
        let upstream = HTTPResponseHead(version: .http1_1, status: .ok,
                                        headers: ["Content-Length": "5", "Connection": "keep-alive", "ETag": "\"x\""])
        let client = MessageRules.clientHead(from: upstream, closing: false)
        #expect(Self.box(client) == Self.box(upstream), "status and version stay in the upstream head's box")
        #expect(Self.fields(client.headers) == ["Content-Length: 5", "ETag: \"x\"", "Via: 1.1 pinproxy"])
        #expect(Self.fields(upstream.headers) == ["Content-Length: 5", "Connection: keep-alive", "ETag: \"x\""])
        let closing = MessageRules.clientHead(from: upstream, closing: true)
        #expect(Self.fields(closing.headers) == ["Content-Length: 5", "ETag: \"x\"", "Via: 1.1 pinproxy", "Connection: close"])
        let old = HTTPResponseHead(version: .http1_0, status: .notFound, headers: ["Content-Length": "0"])
        let upgraded = MessageRules.clientHead(from: old, closing: false)
        #expect(upgraded.version == .http1_1 && upgraded.status == .notFound && old.version == .http1_0)
        #expect(Self.fields(upgraded.headers) == ["Content-Length: 0", "Via: 1.0 pinproxy"])
    }

    /// The case-insensitive compare every head scan uses: ASCII letters
    /// fold, nothing else does (a non-ASCII letter is never its lowercase).
    @Test func headerNamesCompareIgnoringASCIICaseOnly() {
        let cases: [(String, Bool)] = [
            ("connection", true), ("Connection", true), ("CONNECTION", true), ("connectioN", true),
            (String("X-Connection".dropFirst(2)), true), ("connectio", false), ("connections", false),
            ("connection ", false), ("xonnection", false), ("connect1on", false),
        ]
        for (text, equal) in cases { #expect(MessageRules.asciiEqualsIgnoringCase(text, "connection") == equal, "\(text)") }
        #expect(!MessageRules.asciiEqualsIgnoringCase("\u{C0}", "\u{E0}"), "À is not à here: only ASCII folds")
        #expect(MessageRules.asciiEqualsIgnoringCase("\u{E0}", "\u{E0}"))
    }

    // MARK: HTTP/2 streams

    /// Each app stream has its own exchange handler; the session's series are
    /// resolved by the first stream that ends and kept for the others.
    @Test func theStreamsOfOneSessionCountInSeriesResolvedOnce() throws {
        let proxy = try EmbeddedProxy()
        let limits = proxy.services.store.snapshot.config.limits
        let policy = try #require(proxy.services.store.snapshot.policy(forHost: "intercept.test"))
        let session = RequestRouter.Interception(host: "intercept.test", port: 443, policy: policy)
        for _ in 0..<3 {
            let stream = EmbeddedChannel()
            defer { _ = try? stream.finish(acceptAlreadyClosed: true) }
            try stream.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 50_000)).wait()
            try stream.pipeline.syncOperations.addHandler(HTTPExchangeHandler(
                services: proxy.services, interception: session, clientAddress: "127.0.0.1:50000", headTimer: nil,
                limits: limits, clientProtocol: .h2))
            // Another host than the session's: refused (421) without an upstream, and counted.
            var head = HTTPRequestHead(version: .http2, method: .GET, uri: "/x")
            head.headers.add(name: "host", value: "elsewhere.test")
            try stream.writeInbound(AppRequestPart.head(.whole(head)))
            try stream.writeInbound(AppRequestPart.end(nil))
        }
        #expect(proxy.recorder.completed.map(\.status) == [421, 421, 421])
        #expect(proxy.recorder.completed.allSatisfy { $0.policy == "intercept.test" })
        #expect(proxy.recorder.trafficRecorders == 1, "one session: its series resolved once, not per stream")
    }

    /// A stream on a pooled HTTP/2 connection of the asking loop comes
    /// through one promise of NIO's and one callback (no future of ours, no
    /// chain of them): the checkout names the connection, and the stream it
    /// opens arrives on the loop's next tick, as a stream of that
    /// connection. The connection's streams count in the stream gauge
    /// through series it resolved once.
    @Test func aStreamOnAPooledHTTP2ConnectionArrivesOnTheNextTick() throws {
        // The first request dialled (its permit), and the dial opened an HTTP/2 connection carrying its stream.
        let s = try PooledHTTP2Connection()
        defer { s.finish() }
        // The next request gets a stream on it, on the loop's next tick.
        let (stream, reused) = try Self.openStream(s.checkout, s.plan, on: s.channel)
        #expect(stream.parent === s.connection && reused)
        #expect(stream.channel.isActive && stream.http1Handler == nil)
        s.pool.release(stream)
        s.channel.embeddedEventLoop.run()
        #expect(!stream.channel.isActive, "a stream let go before both its messages ended is reset")
        // Two streams more on the same connection.
        for _ in 0..<2 {
            s.pool.release(try Self.openStream(s.checkout, s.plan, on: s.channel).connection)
            s.channel.embeddedEventLoop.run()
        }
        #expect(s.proxy.recorder.trafficRecorders == 1, "one connection: its streams' series resolved once, not per stream")
    }

    /// A checkout that names a pooled HTTP/2 connection of `channel`'s loop,
    /// and the stream opened on it: none before the loop's next tick.
    static func openStream(_ checkout: UpstreamCheckout, _ plan: DialPlan, on channel: EmbeddedChannel) throws
        -> UpstreamCheckout.CheckedOut {
        guard case .stream(let connection) = checkout.checkoutNow(plan, on: channel.eventLoop) else {
            throw PooledHTTP2Connection.Unexpected.notAStream
        }
        var opened: Result<UpstreamCheckout.CheckedOut, any Error>?
        checkout.openStream(on: connection, policy: plan.policy) { opened = $0 }
        #expect(opened == nil, "NIO sets a stream up on the loop's next tick")
        channel.embeddedEventLoop.run()
        return try #require(opened).get()
    }

    // MARK: Upstream readiness

    /// A stream's connection was ready before the stream was opened: its
    /// handler has no promise to keep, and so none to settle or fail (with a
    /// boxed error) when the stream goes.
    @Test func anUpstreamStreamWaitsOnNoReadinessPromise() throws {
        let stream = EmbeddedChannel()
        defer { _ = try? stream.finish(acceptAlreadyClosed: true) }
        let adapter = try UpstreamHTTP2Pipeline.configureStream(stream)
        #expect(!adapter.handler.awaitsReady)
    }

    /// An upstream connection's handler on a channel of its own (not yet
    /// connected), with the promise it settles.
    static func connectionHandler(usesTLS: Bool) throws
        -> (EmbeddedChannel, UpstreamHTTPHandler, EventLoopPromise<TLSHandshakeInfo?>) {
        let channel = EmbeddedChannel()
        let ready = channel.eventLoop.makePromise(of: TLSHandshakeInfo?.self)
        let handler = UpstreamHTTPHandler(ready: ready, usesTLS: usesTLS)
        try channel.pipeline.syncOperations.addHandler(handler)
        return (channel, handler, ready)
    }

    /// A connection's readiness is settled once, then let go: the events
    /// after it (its close) have nothing left to fail.
    @Test func aConnectionIsReadyOnceAndItsPromiseLetGo() throws {
        let (channel, handler, ready) = try Self.connectionHandler(usesTLS: false)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        #expect(handler.awaitsReady, "not connected yet")
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        #expect(!handler.awaitsReady)
        #expect(try ready.futureResult.wait() == nil, "no TLS: ready without a handshake")
        try channel.close().wait()
    }

    /// A dial that fails before the connection is ready still fails its
    /// promise (the connector waits on it).
    @Test func aDialTornDownBeforeItsHandshakeFailsItsReadiness() throws {
        let (channel, handler, ready) = try Self.connectionHandler(usesTLS: true)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        #expect(handler.awaitsReady, "TLS: ready only after the handshake")
        try channel.close().wait()
        #expect(!handler.awaitsReady)
        #expect(throws: ChannelError.ioOnClosedChannel) { try ready.futureResult.wait() }
    }

    /// Every response on an app's stream carries the exchange's
    /// `Connection: close` (a stream is the exchange's whole connection); the
    /// block leaves out what the named set of the general path would have
    /// left out, without building that set.
    @Test(arguments: [
        (HTTPHeaders([("Connection", "close")]), HTTP2HeaderBlocks.ConnectionOptions.close),
        (HTTPHeaders([("Connection", "Keep-Alive")]), .none),
        (HTTPHeaders([("Connection", "keep-alive"), ("Connection", "close")]), .close),
        (HTTPHeaders([("Connection", "close, x-trace")]), .others),
        (HTTPHeaders([("Connection", "x-trace")]), .others),
        (HTTPHeaders([("Content-Type", "text/plain")]), .none),
    ])
    func aResponseBlockDropsWhatItsConnectionFieldsName(connection: HTTPHeaders, options: HTTP2HeaderBlocks.ConnectionOptions) {
        #expect(HTTP2HeaderBlocks.connectionOptions(connection) == options)
        var headers = connection
        for (name, value) in [("Content-Length", "5"), ("close", "1"), ("X-Trace", "t"), ("Keep-Alive", "timeout=5")] {
            headers.add(name: name, value: value)
        }
        let block = HTTP2HeaderBlocks.responseBlock(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))
        // As NIO's codec normalised it: the fields the Connection fields name go, with the hop-by-hop ones.
        let named = Set(connection[canonicalForm: "connection"].map { $0.lowercased() })
        let hopByHop: Set = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]
        let expected = [":status: 200"] + headers.map { ($0.name.lowercased(), $0.value) }
            .filter { !hopByHop.contains($0.0) && !named.contains($0.0) }.map { "\($0.0): \($0.1)" }
        #expect(block.map { "\($0.name): \($0.value)" } == expected)
    }
}
