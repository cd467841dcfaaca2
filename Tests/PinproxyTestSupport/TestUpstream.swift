import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyTLS

/// A repeating byte pattern whose prime period makes lost or repeated chunks show.
public enum TestPattern {
    public static let block: [UInt8] = (0..<65_521).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 7) }

    /// Bytes [offset, offset+count) of the infinite pattern.
    public static func slice(at offset: Int, count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var position = offset
        while out.count < count {
            let phase = position % block.count
            let n = min(count - out.count, block.count - phase)
            out += block[phase..<phase + n]
            position += n
        }
        return out
    }
}

/// An HTTP/1.1 server (over TLS with a given chain, or plain) on 127.0.0.1:0
/// standing in for an upstream API. Routes:
/// `/bytes/N` N pattern bytes (streamed with backpressure), `/slow/MS` answers
/// after MS ms, `/echo` the request as JSON, `/status/N` that status (with
/// `Retry-After: S` for `?retry-after=S`), else a greeting.
/// `closeConnections` ends the connections open now, as a server's keep-alive timeout would.
public final class TestUpstream: @unchecked Sendable {
    public let channel: any Channel
    public var port: Int { channel.localAddress!.port! }
    public let requests = NIOLockedValueBox<[String]>([])
    /// Connections accepted so far.
    public let connections = NIOLockedValueBox(0)
    private let open = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    private let context: NIOLockedValueBox<TLSContext?>

    /// How `closeConnections` ends a connection.
    public enum Closing: Sendable {
        /// close_notify (over TLS), then the TCP connection.
        case full
        /// close_notify alone: the TCP connection stays open, with no FIN, until
        /// the peer closes it. Only a peer that reads sees it. Needs TLS.
        case closeNotifyOnly
    }

    /// Connections open now.
    public var openConnections: Int { open.withLockedValue { $0.count } }

    public init(chainFile: String?, keyFile: String?) async throws {
        let context = NIOLockedValueBox<TLSContext?>(try chainFile.map { try Self.serverContext(chainFile: $0, keyFile: keyFile!) })
        self.context = context
        let requests = self.requests
        let connections = self.connections
        let open = self.open
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    connections.withLockedValue { $0 += 1 }
                    let id = ObjectIdentifier(channel)
                    open.withLockedValue { $0[id] = channel }
                    channel.closeFuture.whenComplete { _ in open.withLockedValue { $0[id] = nil } }
                    if let context = context.withLockedValue({ $0 }) {
                        try channel.pipeline.syncOperations.addHandler(OutputCloseGate())
                        try channel.pipeline.syncOperations.addHandler(TLSHandler(serverContext: context))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(Responder(requests: requests))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// New connections get this certificate (a key rotation, as the upstream's operators would do it).
    public func swapCertificate(chainFile: String, keyFile: String) throws {
        let replacement = try Self.serverContext(chainFile: chainFile, keyFile: keyFile)
        context.withLockedValue { $0 = replacement }
    }

    private static func serverContext(chainFile: String, keyFile: String) throws -> TLSContext {
        try TLSContext(configuration: .server(certificateChain: try Certificate.loadPEM(file: chainFile), privateKey: try PrivateKey(pemFile: keyFile)))
    }

    /// Ends every connection open now (idle keep-alive ones included), as a
    /// server whose keep-alive timeout passed would; returns how many.
    @discardableResult
    public func closeConnections(_ how: Closing = .full) throws -> Int {
        if case .closeNotifyOnly = how, context.withLockedValue({ $0 }) == nil {
            throw TestSupportError("closeNotifyOnly needs a TLS upstream")
        }
        let channels = open.withLockedValue { Array($0.values) }
        for channel in channels {
            channel.eventLoop.execute {
                switch how {
                case .full:
                    channel.close(promise: nil)
                case .closeNotifyOnly:
                    guard let gate = try? channel.pipeline.syncOperations.handler(type: OutputCloseGate.self) else {
                        channel.close(promise: nil)  // not TLS: there is no close_notify to send
                        return
                    }
                    gate.holdsOutputOpen = true
                    // TLSHandler sends close_notify, then closes the output: the gate keeps the socket's open.
                    channel.close(mode: .output, promise: nil)
                }
            }
        }
        return channels.count
    }

    public func stop() { channel.close(promise: nil) }
    deinit { channel.close(promise: nil) }

    /// Below TLS: once told to, it keeps the TCP connection's output open
    /// when TLS closes its own (`close(mode: .output)` after close_notify).
    final class OutputCloseGate: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        var holdsOutputOpen = false

        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            if mode == .output && holdsOutputOpen {
                promise?.succeed()
                return
            }
            context.close(mode: mode, promise: promise)
        }
    }

    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let requests: NIOLockedValueBox<[String]>
        private var head: HTTPRequestHead?
        private var bodyBytes = 0
        private var streaming: (remaining: Int, offset: Int)?
        private var keepAlive = true

        init(requests: NIOLockedValueBox<[String]>) { self.requests = requests }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                bodyBytes = 0
                keepAlive = head.isKeepAlive
                requests.withLockedValue { $0.append("\(head.method) \(head.uri)") }
            case .body(let body):
                bodyBytes += body.readableBytes
            case .end:
                respond(context: context)
            }
        }

        private func respond(context: ChannelHandlerContext) {
            guard let head else { return }
            let path = head.uri
            if path.hasPrefix("/bytes/"), let count = Int(path.dropFirst(7)) {
                var headers = HTTPHeaders([("Content-Length", String(count)), ("Content-Type", "application/octet-stream")])
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))), promise: nil)
                streaming = (count, 0)
                pump(context: context)
            } else if path.hasPrefix("/slow/"), let ms = Int64(path.dropFirst(6)) {
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(ms)) {
                    self.send(context: context, status: .ok, body: "slow response after \(ms) ms")
                }
            } else if path.hasPrefix("/status/"), let code = Int(path.dropFirst(8).prefix { $0 != "?" }) {
                // `?retry-after=S` adds that header (a 429 that opens a window).
                let retryAfter = path.split(separator: "?", maxSplits: 1).dropFirst().first
                    .flatMap { $0.split(separator: "&").first { $0.hasPrefix("retry-after=") } }.map { String($0.dropFirst(12)) }
                send(context: context, status: HTTPResponseStatus(statusCode: code), body: "{\"status\": \(code)}",
                     extraHeaders: retryAfter.map { [("Retry-After", $0)] } ?? [])
            } else if path.hasPrefix("/echo") {
                let headerList = head.headers.map { "[\"\(Self.escape($0.name))\", \"\(Self.escape($0.value))\"]" }.joined(separator: ", ")
                send(context: context, status: .ok, body: "{\"method\": \"\(head.method.rawValue)\", \"uri\": \"\(Self.escape(head.uri))\", \"headers\": [\(headerList)], \"body_bytes\": \(bodyBytes)}")
            } else {
                send(context: context, status: .ok, body: "hello from upstream")
            }
        }

        private func send(context: ChannelHandlerContext, status: HTTPResponseStatus, body: String, extraHeaders: [(String, String)] = []) {
            var headers = HTTPHeaders([("Content-Length", String(body.utf8.count)), ("Content-Type", "text/plain")] + extraHeaders)
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
            let close = !keepAlive
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                if close { context.close(promise: nil) }
            }
        }

        func channelWritabilityChanged(context: ChannelHandlerContext) {
            pump(context: context)
            context.fireChannelWritabilityChanged()
        }

        private func pump(context: ChannelHandlerContext) {
            while var state = streaming, context.channel.isWritable {
                if state.remaining == 0 {
                    streaming = nil
                    let close = !keepAlive
                    context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                        if close { context.close(promise: nil) }
                    }
                    return
                }
                let n = min(65_536, state.remaining)
                var buffer = context.channel.allocator.buffer(capacity: n)
                buffer.writeBytes(TestPattern.slice(at: state.offset, count: n))
                state.remaining -= n
                state.offset += n
                streaming = state
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            }
        }

        static func escape(_ text: String) -> String {
            text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
    }
}
