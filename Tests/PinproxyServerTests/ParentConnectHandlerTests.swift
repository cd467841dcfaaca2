import NIOCore
import NIOEmbedded
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// The CONNECT to a parent proxy (docs/contract.md §15), byte by byte.
struct ParentConnectHandlerTests {
    static let target = HostPort(host: "127.0.0.1", port: 8443)

    static func run(parent: UpstreamProxy = UpstreamProxy(host: "parent", port: 3128, credentials: nil),
                    answer: [String]) throws -> (written: String, result: Result<Void, any Error>?) {
        let channel = EmbeddedChannel()
        // Closed (if still open) and run on the way out, so the pipeline lets
        // go of the handler and the channel instead of holding them past the test.
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let promise = channel.eventLoop.makePromise(of: Void.self)
        var result: Result<Void, any Error>?
        promise.futureResult.assumeIsolated().whenComplete { result = $0 }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3128)).wait()
        try channel.pipeline.syncOperations.addHandler(ParentConnectHandler(parent: parent, target: target, host: "api.test", answered: promise))
        let written = try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } ?? ""
        for piece in answer { try channel.writeInbound(ByteBuffer(string: piece)) }
        if result == nil { _ = try? channel.finish() }
        return (written, result)
    }

    @Test func sendsConnectWithCredentialsAndTakesA200SplitAcrossReads() throws {
        let parent = UpstreamProxy(host: "parent", port: 3128, credentials: Secret("egress:p@ss:word"))
        let (written, result) = try Self.run(parent: parent, answer: ["HTTP/1.1 200 Conn", "ection established\r\n\r", "\n"])
        #expect(written == "CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\nProxy-Authorization: \(ProxyCredential(user: "egress", password: "p@ss:word").headerValue)\r\n\r\n")
        guard case .success = result else { Issue.record("expected success, got \(String(describing: result))"); return }
    }

    @Test func aRefusalNamesTheParentsStatus() throws {
        let (written, result) = try Self.run(answer: ["HTTP/1.0 403 Filtered\r\nContent-Length: 0\r\n\r\n"])
        #expect(!written.contains("Proxy-Authorization"))
        guard case .failure(let error as ProxyError) = result else { Issue.record("expected a refusal"); return }
        #expect(error.code == .connectFailed)
        #expect(error.detail == "parent proxy http://parent:3128 refused CONNECT 127.0.0.1:8443: 403 Filtered")
    }

    @Test func bytesAfterTheHeadOrNoHTTPAreRefused() throws {
        guard case .failure(let extra as ProxyError) = try Self.run(answer: ["HTTP/1.1 200 OK\r\n\r\nsurprise"]).result else {
            Issue.record("expected a refusal"); return
        }
        #expect(extra.detail.contains("sent data after its CONNECT answer"))
        guard case .failure(let garbage as ProxyError) = try Self.run(answer: ["SSH-2.0-OpenSSH\r\n\r\n"]).result else {
            Issue.record("expected a refusal"); return
        }
        #expect(garbage.detail.contains("not HTTP"))
    }

    @Test func aClosedParentIsConnectFailed() throws {
        guard case .failure(let closed as ProxyError) = try Self.run(answer: ["HTTP/1.1 200"]).result else {
            Issue.record("expected a refusal"); return
        }
        #expect(closed.detail.contains("closed the connection before answering"))
    }
}
