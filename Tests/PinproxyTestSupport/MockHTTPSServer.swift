import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyTLS

/// One whole request as a mock sees it (the body is buffered: mocks answer small forms and JSON).
public struct MockRequest: Sendable {
    public var method: String
    /// The path without the query.
    public var path: String
    public var query: String?
    public var headers: [(String, String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }
}

public struct MockResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func json(_ status: Int, _ object: [String: any Sendable], headers: [(String, String)] = []) -> MockResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return MockResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(data))
    }
}

public enum MockAction: Sendable {
    case respond(MockResponse)
    /// Answer, but only after this many seconds (a slow service).
    case respondAfter(MockResponse, seconds: Double)
    /// Drop the connection without answering ("down").
    case close
}

/// An HTTP/1.1-over-TLS server on 127.0.0.1:0 that hands each complete
/// request to `handler`. The shared engine of `MockAccounts` and `MockWebAPI`.
public final class MockHTTPSServer: Sendable {
    public let channel: any Channel
    public var port: Int { channel.localAddress!.port! }
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    /// `refuse` is asked at every accept: true closes the connection at once.
    public init(chainFile: String, keyFile: String, refuse: @escaping @Sendable () -> Bool = { false },
                handler: @escaping @Sendable (MockRequest) -> MockAction) async throws {
        let context = try TLSContext(configuration: .server(certificateChain: try Certificate.loadPEM(file: chainFile),
                                                            privateKey: try PrivateKey(pemFile: keyFile)))
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                if refuse() { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(serverContext: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestCollector(handler: handler))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    public func stop() { channel.close(promise: nil) }
    deinit { channel.close(promise: nil) }

    final class RequestCollector: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let handler: @Sendable (MockRequest) -> MockAction
        private var head: HTTPRequestHead?
        private var body: [UInt8] = []

        init(handler: @escaping @Sendable (MockRequest) -> MockAction) { self.handler = handler }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(var buffer):
                body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                guard let head else { return }
                self.head = nil
                let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
                let request = MockRequest(method: head.method.rawValue, path: String(parts[0]), query: parts.count > 1 ? String(parts[1]) : nil,
                                          headers: head.headers.map { ($0.name, $0.value) }, body: body)
                switch handler(request) {
                case .close:
                    context.close(promise: nil)
                case .respond(let response):
                    send(response, keepAlive: head.isKeepAlive, context: context)
                case .respondAfter(let response, let seconds):
                    let keepAlive = head.isKeepAlive
                    context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) {
                        if context.channel.isActive { self.send(response, keepAlive: keepAlive, context: context) }
                    }
                }
            }
        }

        private func send(_ response: MockResponse, keepAlive: Bool, context: ChannelHandlerContext) {
            var headers = HTTPHeaders(response.headers)
            headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
            if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
            let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            if !response.body.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
            }
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }
}

/// `application/x-www-form-urlencoded` (the WHATWG URL standard's rules).
public enum FormURLEncoding {
    public static func decode(_ bytes: [UInt8]) -> [(String, String)] {
        String(decoding: bytes, as: UTF8.self).split(separator: "&").map { pair in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func unescape(_ s: Substring) -> String {
                String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            return (unescape(kv[0]), kv.count > 1 ? unescape(kv[1]) : "")
        }
    }

    public static func encode(_ pairs: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        allowed.insert(charactersIn: "-._*")
        func escape(_ s: String) -> String {
            (s.addingPercentEncoding(withAllowedCharacters: allowed.union(CharacterSet(charactersIn: " "))) ?? s)
                .replacingOccurrences(of: " ", with: "+")
        }
        return pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }
}
