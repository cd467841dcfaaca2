import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyTLS
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// `ConnectHandler` behind the listener's exchange handler, on an
/// `EmbeddedChannel`: refusals written below the encoder (NIO's encoder would
/// drop a CONNECT answer's body), and an intercepted session whose TLS is
/// played against a client `TLSHandler` in memory, as swift-nio-ssl's tests do.
@Suite("CONNECT handler on an embedded channel")
struct ConnectHandlerTests {
    @Test(arguments: [
        ("denied.test", "denied.test", "policy denied.test"),
        ("nopolicy.test", "_none", "default_action is deny"),
    ])
    func aConnectToADeniedHostGets403WithItsJSONBodyAndCloses(host: String, policy: String, detail: String) throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 403)
        #expect(response.headers["x-pinproxy-error"] == "host_denied")
        #expect(response.headers["connection"] == "close")
        let body = try #require(response.json, "the body is there despite the encoder: \(response.body)")
        #expect(body["error"] as? String == "host_denied")
        #expect(body["host"] as? String == host)
        #expect((body["detail"] as? String)?.contains(detail) == true, "\(body)")
        #expect(!proxy.isOpen)

        #expect(proxy.accessLines.count == 1)
        let line = try #require(proxy.accessLines.first)
        #expect(line["method"] == "CONNECT")
        #expect(line["mode"] == "connect")
        #expect(line["status"] == "403")
        #expect(line["error"] == "host_denied")
        #expect(line["host"] == host)
        #expect(line["policy"] == policy)
        #expect(proxy.recorder.denied == ["host_denied"])
        #expect(proxy.recorder.completed.map(\.status) == [403])
    }

    @Test(arguments: ["nohost:99999", "[::1", "bad!host:443", "1.2.3.256:443"])
    func aConnectWithABadTargetGets400AndCloses(target: String) throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT \(target) HTTP/1.1\r\nHost: x\r\n\r\n")

        let responses = try proxy.responses()
        #expect(responses.count == 1)
        let response = try #require(responses.first)
        #expect(response.status == 400, "\(response.statusLine) \(response.body)")
        #expect(response.headers["x-pinproxy-error"] == "bad_request")
        #expect(response.json?["error"] as? String == "bad_request")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["status"] } == ["400"])
        #expect(proxy.recorder.denied == ["bad_request"])
    }

    @Test func aRefusedConnectIsAnsweredOnceWhateverFollowsIt() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT denied.test:443 HTTP/1.1\r\n\r\nCONNECT denied.test:443 HTTP/1.1\r\n\r\n")
        #expect(try proxy.responses().map(\.status) == [403])
        #expect(proxy.accessLines.count == 1)
        #expect(!proxy.isOpen)
    }

    // MARK: Interception

    /// An app on the far side of an intercepted CONNECT: a client `TLSHandler`
    /// trusting pinproxy's CA, on an embedded channel of its own.
    struct App {
        let channel: EmbeddedChannel

        /// `offering`: the app's ALPN offer (nil: none).
        init(trusting ca: CertificateAuthority, serverName: String, offering: [String]? = nil) throws {
            channel = EmbeddedChannel()
            let context = try TLSContext(configuration: .client(trustRoots: .certificates([ca.certificate])))
            try channel.pipeline.syncOperations.addHandler(
                TLSHandler(clientContext: context, serverName: serverName, applicationProtocols: offering))
        }

        /// The app's first flight (its ClientHello).
        func connect() throws -> ByteBuffer {
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
            channel.embeddedEventLoop.run()
            var hello = ByteBuffer()
            while let bytes = try channel.readOutbound(as: ByteBuffer.self) { hello.writeImmutableBuffer(bytes) }
            return hello
        }

        /// Moves bytes both ways until neither side has more (bounded).
        func interact(with proxy: EmbeddedProxy) throws {
            for _ in 0..<100 {
                var progress = false
                if let bytes = try channel.readOutbound(as: ByteBuffer.self) {
                    if proxy.isOpen { try proxy.send(bytes) }
                    progress = true
                }
                if let bytes = try proxy.channel.readOutbound(as: ByteBuffer.self) {
                    if channel.isActive { try channel.writeInbound(bytes) }
                    progress = true
                }
                channel.embeddedEventLoop.run()
                proxy.channel.embeddedEventLoop.run()
                if !progress { return }
            }
            throw TestSupportError("the two sides never went quiet")
        }

        /// Plaintext the app received.
        func received() throws -> String {
            var text = ""
            while let bytes = try channel.readInbound(as: ByteBuffer.self) { text += String(buffer: bytes) }
            return text
        }

        func send(_ text: String) {
            channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
        }

        /// Closes the app's side (if still open) and runs its loop: until then
        /// the channel, its pipeline and its TLS handler hold one another and
        /// outlive the test.
        func finish() {
            _ = try? channel.finish(acceptAlreadyClosed: true)
        }
    }

    /// Reads the proxy's plaintext answer to the CONNECT (before any TLS byte).
    static func connectAnswer(_ proxy: EmbeddedProxy) throws -> String {
        let bytes = try #require(try proxy.channel.readOutbound(as: ByteBuffer.self))
        return String(buffer: bytes)
    }

    @Test func anInterceptedConnectIsAnsweredThenTheSessionsLayersReplaceTheListeners() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")

        let answer = try Self.connectAnswer(proxy)
        #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer.debugDescription)")
        #expect(answer.contains("\r\nVia: 1.1 pinproxy\r\n"))
        #expect(answer.hasSuffix("\r\n\r\n"), "a head alone: no body, no framing")
        #expect(proxy.isOpen)
        let sync = proxy.channel.pipeline.syncOperations
        #expect((try? sync.handler(type: ConnectHandler.self)) == nil, "the listener's CONNECT handler is gone")
        #expect((try? sync.handler(type: TLSHandler.self)) != nil)
        // The session's HTTP layers wait for ALPN (PipelineBuilderTests has their shapes).
        #expect((try? sync.handler(type: HTTPExchangeHandler.self)) == nil, "no HTTP layer before the handshake")
        #expect(proxy.accessLines.isEmpty, "an intercepted session's requests have lines of their own")
    }

    /// docs/contract.md §1 step 3: pinproxy answers "200 Connection established".
    @Test func theConnectAnswerSaysConnectionEstablished() throws {
        let proxy = try EmbeddedProxy()
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        let answer = try Self.connectAnswer(proxy)
        #expect(answer.hasPrefix("HTTP/1.1 200 Connection established\r\n"), "\(answer.debugDescription)")
    }

    /// The app sends its ClientHello in the same read as the CONNECT head: the
    /// listener's decoder must hand those bytes on to the session's TLS layer.
    @Test func aTLSHelloSentWithTheConnectHeadIsNotLost() throws {
        let proxy = try EmbeddedProxy()
        let app = try App(trusting: proxy.services.ca, serverName: "intercept.test")
        defer { app.finish() }
        var bytes = ByteBuffer(string: "CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        var hello = try app.connect()
        #expect(hello.readableBytes > 0)
        bytes.writeBuffer(&hello)
        try proxy.send(bytes)

        #expect(try Self.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        try app.interact(with: proxy)
        #expect(proxy.recorder.clientHandshakes == ["ok"])
        #expect(proxy.recorder.minted == 1, "one leaf minted for intercept.test")
    }

    /// An app whose TLS session with pinproxy for intercept.test is up.
    static func interceptedSession() throws -> (EmbeddedProxy, App) {
        let proxy = try EmbeddedProxy()
        let app = try App(trusting: proxy.services.ca, serverName: "intercept.test")
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        #expect(try Self.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        try proxy.send(try app.connect())
        try app.interact(with: proxy)
        #expect(proxy.recorder.clientHandshakes == ["ok"])
        return (proxy, app)
    }

    /// Inside the session a Host other than the CONNECT host gets 421, and
    /// the session stays open for the next request.
    @Test func aRequestForAnotherHostInsideTheSessionGets421() throws {
        let (proxy, app) = try Self.interceptedSession()
        defer { app.finish() }
        app.send("GET /me HTTP/1.1\r\nHost: elsewhere.test\r\n\r\nGET /me HTTP/1.1\r\nHost: intercept.test:8443\r\n\r\n")
        try app.interact(with: proxy)

        let responses = try RawResponse.parseAll(app.received())
        #expect(responses.map(\.status) == [421, 421], "another name, then the right name on another port")
        #expect(responses.map { $0.headers["x-pinproxy-error"] } == ["host_mismatch", "host_mismatch"])
        #expect(responses.first?.json?["host"] as? String == "intercept.test")
        #expect(proxy.isOpen, "a 421 leaves the session open")
        let lines = proxy.accessLines
        #expect(lines.map { $0["status"] } == ["421", "421"])
        #expect(lines.map { $0["mode"] } == ["intercept", "intercept"])
        #expect(lines.first?["host"] == "intercept.test")
        #expect(lines.first?["policy"] == "intercept.test")
        #expect(proxy.recorder.denied == ["host_mismatch", "host_mismatch"])
    }

    /// A CONNECT inside the session is refused with 400 and the session
    /// closes; like every refusal it carries its JSON body (contract §4).
    @Test func aConnectInsideTheSessionGets400WithItsBody() throws {
        let (proxy, app) = try Self.interceptedSession()
        defer { app.finish() }
        app.send("CONNECT other.test:443 HTTP/1.1\r\nHost: intercept.test\r\n\r\n")
        try app.interact(with: proxy)

        let responses = try RawResponse.parseAll(app.received())
        #expect(responses.map(\.status) == [400])
        #expect(responses.first?.headers["x-pinproxy-error"] == "bad_request")
        #expect(!proxy.isOpen)
        #expect(proxy.accessLines.map { $0["status"] } == ["400"])
        #expect(proxy.accessLines.first?["error"] == "bad_request")
        #expect(proxy.recorder.denied == ["bad_request"])
        #expect(responses.first?.headers["content-length"] != nil)
        #expect((responses.first?.json?["detail"] as? String)?.contains("CONNECT inside an intercepted session") == true, "\(responses)")
    }
}
