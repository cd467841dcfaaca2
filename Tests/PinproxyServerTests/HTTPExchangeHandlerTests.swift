import Foundation
import NIOCore
import NIOEmbedded
import Testing

@testable import PinproxyServer

/// The listener's `HTTPExchangeHandler` (with the real head timer and HTTP
/// codec in front of it) on an `EmbeddedChannel`: raw request bytes in, the
/// response bytes the app would read out. Only what needs no upstream:
/// refusals, framing, head limits, pipelining, shutdown, the client ACL.
@Suite("HTTP exchange handler on an embedded channel")
struct HTTPExchangeHandlerTests {
    @Test(arguments: [
        ("denied.test", "denied.test", "policy denied.test"),
        ("nopolicy.test", "_none", "default_action is deny"),
    ])
    func aDeniedHostGets403WithTheContractsBodyAndOneAccessLine(host: String, policy: String, detail: String) throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("GET http://\(host)/path?token=secret HTTP/1.1\r\nHost: \(host)\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 403)
        #expect(response.headers["x-pinproxy-error"] == "host_denied")
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.headers["via"] == "1.1 pinproxy")
        #expect(response.headers["connection"] == nil, "a 403 leaves a keep-alive connection open")
        let body = try #require(response.json, "\(response.body)")
        #expect(body["error"] as? String == "host_denied")
        #expect(body["host"] as? String == host)
        #expect((body["detail"] as? String)?.contains(detail) == true, "\(body)")
        #expect(proxy.isOpen)

        #expect(proxy.accessLines.count == 1)
        let line = try #require(proxy.accessLines.first)
        #expect(line["status"] == "403")
        #expect(line["error"] == "host_denied")
        #expect(line["host"] == host)
        #expect(line["method"] == "GET")
        #expect(line["mode"] == "forward")
        #expect(line["policy"] == policy)
        #expect(line["path"] == "/path", "the query is not logged")
        #expect(line["client"] == "127.0.0.1:50000")
        // Counted twice: under its status and under its code.
        #expect(proxy.recorder.denied == ["host_denied"])
        #expect(proxy.recorder.completed.map(\.status) == [403])
        #expect(proxy.recorder.completed.map(\.policy) == [policy])
    }

    @Test func aMalformedRequestGets400AndTheConnectionCloses() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nthis line has no colon\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 400)
        #expect(response.headers["x-pinproxy-error"] == "bad_request")
        #expect(response.headers["connection"] == "close")
        #expect((response.json?["detail"] as? String)?.contains("malformed HTTP request") == true, "\(response.body)")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.count == 1)
        #expect(proxy.accessLines.first?["status"] == "400")
        #expect(proxy.accessLines.first?["error"] == "bad_request")
        #expect(proxy.recorder.denied == ["bad_request"])
    }

    /// Half a head with a bad line, and no more bytes: answered 400 as soon
    /// as the bad line's CRLF has come, as NIO's decoder answered, not
    /// left waiting for the head's end (an app that then waits would get
    /// 408 from the head timer instead).
    @Test(arguments: [
        "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nthis line has no colon\r\n",
        "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n folded\r\n",
        "GET http://denied.test/caf\u{E9} HTTP/1.1\r\n",
    ])
    func halfAHeadWithABadLineGets400AtOnce(request: String) throws {
        let proxy = try EmbeddedProxy()
        try proxy.send(request)

        let responses = try proxy.responses()
        #expect(responses.map(\.status) == [400])
        #expect(responses.first?.headers["x-pinproxy-error"] == "bad_request")
        #expect(!proxy.isOpen)
    }

    /// Heads the HTTP parser accepts but whose framing pinproxy refuses
    /// (docs/contract.md §10). Framing is judged before the policy: a denied
    /// host gets 400, not 403.
    @Test(arguments: [
        "Transfer-Encoding: gzip, chunked\r\n",
        "Connection: content-length\r\nContent-Length: 0\r\n",
        "Connection: " + (1...33).map { "t\($0)" }.joined(separator: ", ") + "\r\n",
    ])
    func ambiguousFramingGets400AndTheConnectionCloses(headers: String) throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\(headers)\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 400, "\(response.statusLine) \(response.body)")
        #expect(response.headers["x-pinproxy-error"] == "bad_request")
        #expect(response.headers["connection"] == "close")
        #expect((response.json?["detail"] as? String)?.contains("ambiguous message framing") == true, "\(response.body)")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["status"] } == ["400"])
    }

    /// Each way a head can be too large with `max_header_bytes: 4096`.
    enum OversizeHead: String, CaseIterable {
        /// One field over the limit: the decoder's own limit.
        case oneHugeField
        /// Names and values under the limit, the head as sent over it (the
        /// decoder does not count separators): the router's count.
        case manySmallFields
        /// More than 256 fields.
        case tooManyFields
        /// A head that keeps arriving without ending: the head timer's count.
        case neverEnding
    }

    @Test(arguments: OversizeHead.allCases)
    func anOversizeHeadGets431AndTheConnectionCloses(_ shape: OversizeHead) throws {
        let proxy = try EmbeddedProxy(maxHeaderBytes: 4096)
        let line = "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n"
        switch shape {
        case .oneHugeField:
            try proxy.send(line + "X-Big: \(String(repeating: "a", count: 5000))\r\n\r\n")
        case .manySmallFields:
            // 200 × 17 bytes of names and values (3,400), 200 × 21 on the wire (4,200).
            let fields = (0..<200).map { String(format: "X-%03d: ", $0) + String(repeating: "v", count: 12) + "\r\n" }.joined()
            try proxy.send(line + fields + "\r\n")
        case .tooManyFields:
            try proxy.send(line + (0..<257).map { "a\($0): b\r\n" }.joined() + "\r\n")
        case .neverEnding:
            try proxy.send("GET http://denied.test/" + String(repeating: "a", count: 3000))
            #expect(try proxy.output().isEmpty, "not over the limit yet")
            try proxy.send(String(repeating: "a", count: 2000))
        }

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 431, "\(response.statusLine) \(response.body)")
        #expect(response.headers["x-pinproxy-error"] == "bad_request")
        #expect(response.headers["connection"] == "close")
        #expect((response.json?["detail"] as? String)?.contains("max_header_bytes") == true, "\(response.body)")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["status"] } == ["431"])
        #expect(proxy.recorder.denied == ["bad_request"])
    }

    @Test func anOriginFormRequestOnTheListenerGets400() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("GET /path HTTP/1.1\r\nHost: denied.test\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 400)
        #expect(response.headers["x-pinproxy-error"] == "bad_request")
        #expect((response.json?["detail"] as? String)?.contains("forward proxy") == true, "\(response.body)")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["error"] } == ["bad_request"])
    }

    @Test func pipelinedRefusalsAreAnsweredInOrder() throws {
        let proxy = try EmbeddedProxy()
        // Three requests in one read; the second has a body that must not be read as a request.
        let body = "GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n"
        try proxy.send(
            "GET http://denied.test/a HTTP/1.1\r\nHost: denied.test\r\n\r\n"
                + "POST http://nopolicy.test/b HTTP/1.1\r\nHost: nopolicy.test\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                + body
                + "GET http://denied.test/c HTTP/1.1\r\nHost: denied.test\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.map(\.status) == [403, 403, 403])
        #expect(responses.map { $0.json?["host"] as? String } == ["denied.test", "nopolicy.test", "denied.test"])
        #expect(proxy.accessLines.map { $0["path"] } == ["/a", "/b", "/c"])
        #expect(proxy.isOpen)
    }

    /// A HEAD's refusal has no body on the wire (its Content-Length still
    /// says what a GET would get), so the next response is not misread.
    @Test func aRefusedHeadIsAnsweredWithoutABodyAndTheNextRequestFollows() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send(
            "HEAD http://denied.test/a HTTP/1.1\r\nHost: denied.test\r\n\r\n"
                + "GET http://denied.test/b HTTP/1.1\r\nHost: denied.test\r\n\r\n")

        let text = try proxy.output()
        let heads = text.components(separatedBy: "HTTP/1.1 ")
        #expect(heads.count == 3, "two responses: \(text.debugDescription)")
        #expect(heads.dropFirst().first?.hasSuffix("\r\n\r\n") == true, "the HEAD's answer ends with its head")
        #expect(heads.dropFirst().first?.contains("X-Pinproxy-Error: host_denied") == true)
        #expect(heads.last?.contains("\"error\": \"host_denied\"") == true, "the GET's answer has its body")
        #expect(proxy.accessLines.map { $0["method"] } == ["HEAD", "GET"])
        #expect(proxy.isOpen)
    }

    /// A refused request whose unread body is larger than the drain limit
    /// closes the connection instead of reading it all.
    @Test func aRefusedRequestWithALargeUnreadBodyCloses() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nContent-Length: 100000\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.map(\.status) == [403])
        #expect(responses.first?.headers["connection"] == "close")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.count == 1)
    }

    @Test func aRefusedRequestWithASmallBodyIsReadToItsEndAndTheConnectionStays() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nContent-Length: 1000\r\n\r\n")
        #expect(try proxy.responses().map(\.status) == [403])
        #expect(proxy.accessLines.isEmpty, "the exchange ends with its request")
        try proxy.send(String(repeating: "x", count: 1000))
        #expect(proxy.isOpen)
        #expect(proxy.accessLines.count == 1)
    }

    /// `websocket: deny` (docs/contract.md §11): the upgrade gets 403
    /// `upgrade_denied` and the connection closes (the decoder reads nothing
    /// after an upgrade request), so what was pipelined behind it is not answered.
    @Test func aDeniedWebSocketUpgradeGets403AndTheConnectionCloses() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send(
            "GET ws://ws-denied.test/chat HTTP/1.1\r\nHost: ws-denied.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                + "GET http://denied.test/next HTTP/1.1\r\nHost: denied.test\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.map(\.status) == [403])
        #expect(responses.first?.headers["x-pinproxy-error"] == "upgrade_denied")
        #expect(responses.first?.json?["error"] as? String == "upgrade_denied")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["error"] } == ["upgrade_denied"])
    }

    @Test func nothingIsAnsweredAfterARefusalThatCloses() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send(
            "GET /origin-form HTTP/1.1\r\nHost: denied.test\r\n\r\n"
                + "GET http://denied.test/next HTTP/1.1\r\nHost: denied.test\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.map(\.status) == [400])
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.count == 1)
    }

    @Test func aShutdownClosesAnIdleConnectionAtOnce() throws {
        let proxy = try EmbeddedProxy()
        #expect(proxy.isOpen)
        proxy.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        proxy.channel.embeddedEventLoop.run()

        #expect(!proxy.isOpen)
        #expect(try proxy.output().isEmpty)
        #expect(proxy.accessLines.isEmpty)
    }

    @Test func aShutdownClosesAKeepAliveConnectionBetweenRequests() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n")
        #expect(try proxy.responses().map(\.status) == [403])
        #expect(proxy.isOpen)

        proxy.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        proxy.channel.embeddedEventLoop.run()
        #expect(!proxy.isOpen)
    }

    @Test func aShutdownLetsTheRequestInProgressEndFirst() throws {
        let proxy = try EmbeddedProxy()
        // Refused at its head, with half of its body still to come.
        try proxy.send("POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nContent-Length: 10\r\n\r\nhello")
        #expect(try proxy.responses().map(\.status) == [403])

        proxy.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        proxy.channel.embeddedEventLoop.run()
        #expect(proxy.isOpen, "the request is still arriving")

        try proxy.send("world")
        #expect(!proxy.isOpen, "closed once the request ended")
        #expect(proxy.accessLines.count == 1)
    }

    // MARK: Deadlines, swept by hand with a "now" in the future (no waiting)

    /// What the event loop's `DeadlineSweeper` does every tick, at `now`.
    static func sweep(_ proxy: EmbeddedProxy, at now: NIODeadline) throws {
        let sync = proxy.channel.pipeline.syncOperations
        if let timer = try? sync.handler(type: RequestHeadTimer.self) { timer.checkDeadlines(now: now) }
        if let exchanges = try? sync.handler(type: HTTPExchangeHandler.self) { exchanges.checkDeadlines(now: now) }
        proxy.channel.embeddedEventLoop.run()
    }

    @Test func anIdleConnectionIsClosedOnceIdleTimeoutHasPassed() throws {
        let proxy = try EmbeddedProxy()  // idle_timeout 60 s, header_timeout 10 s
        try Self.sweep(proxy, at: .now() + .seconds(30))
        #expect(proxy.isOpen, "idle for less than idle_timeout")
        try Self.sweep(proxy, at: .now() + .seconds(61))
        #expect(!proxy.isOpen)
        #expect(try proxy.output().isEmpty, "an idle connection is closed without a word")
    }

    @Test func aHeadThatStopsArrivingIsCutAfterHeaderTimeout() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("GET http://denied.test/ HTTP/1.1\r\nHost: den")
        try Self.sweep(proxy, at: .now() + .seconds(5))
        #expect(proxy.isOpen)
        try Self.sweep(proxy, at: .now() + .seconds(11))
        #expect(!proxy.isOpen, "header_timeout, well before idle_timeout")
    }

    /// docs/contract.md §10: a request body that makes no progress for
    /// `idle_timeout` while pinproxy reads it is cut. A refused request's
    /// body is read (to drain it) too.
    @Test func aStalledBodyOfARefusedRequestIsCut() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("POST http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\nContent-Length: 10\r\n\r\nhello")
        #expect(try proxy.responses().map(\.status) == [403])
        try Self.sweep(proxy, at: .now() + .seconds(3600))
        #expect(!proxy.isOpen)
    }

    @Test func aClientOutsideTheACLGets403BeforeAnyHTTP() throws {
        let proxy = try EmbeddedProxy(client: "10.1.2.3")
        #expect((try? proxy.channel.pipeline.syncOperations.handler(type: HTTPExchangeHandler.self)) == nil,
                "no HTTP layer was installed")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 403)
        #expect(response.headers["x-pinproxy-error"] == "client_denied")
        #expect(response.json?["error"] as? String == "client_denied")
        #expect(!proxy.isOpen)
        #expect(proxy.recorder.denied == ["client_denied"])
        #expect(proxy.accessLines.isEmpty)
        #expect(proxy.recorder.logs.contains { $0.message == "client refused" && $0.metadata["error"] == "client_denied" })
    }
}
