import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyTLS

/// What the far end of a test connection saw: plaintext, errors, the handshake.
final class Observations: @unchecked Sendable {
    private let lock = NIOLock()
    private var _bytes: [UInt8] = []
    private var _errors: [any Error] = []
    private var _handshake: TLSHandshakeInfo?
    let handshakeCompleted: EventLoopPromise<TLSHandshakeInfo>
    let closed: EventLoopPromise<Void>

    init(eventLoop: any EventLoop) {
        handshakeCompleted = eventLoop.makePromise()
        closed = eventLoop.makePromise()
    }

    var bytes: [UInt8] { lock.withLock { _bytes } }
    var text: String { String(decoding: bytes, as: UTF8.self) }
    var errors: [any Error] { lock.withLock { _errors } }
    var handshake: TLSHandshakeInfo? { lock.withLock { _handshake } }

    func append(_ buffer: ByteBuffer) { lock.withLock { _bytes += buffer.readableBytesView } }
    func record(_ error: any Error) {
        lock.withLock { _errors.append(error) }
        handshakeCompleted.fail(error)
    }
    func record(_ info: TLSHandshakeInfo) {
        lock.withLock { _handshake = info }
        handshakeCompleted.succeed(info)
    }
}

/// Records everything that reaches the top of a test pipeline; optionally
/// answers each request-looking read with a fixed HTTP response and closes.
final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let observations: Observations
    let httpResponder: Bool
    let greeting: String?
    private var request: [UInt8] = []

    init(observations: Observations, httpResponder: Bool = false, greeting: String? = nil) {
        self.observations = observations
        self.httpResponder = httpResponder
        self.greeting = greeting
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        observations.append(buffer)
        guard httpResponder else { return }
        request += buffer.readableBytesView
        if String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let body = "hello from pinproxy tls"
            let response = "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let info) = event as? TLSUserEvent {
            observations.record(info)
            if let greeting {
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: greeting)), promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        observations.record(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        observations.closed.succeed()
        observations.handshakeCompleted.fail(ChannelError.ioOnClosedChannel)
    }
}

enum Loopback {
    static var group: MultiThreadedEventLoopGroup { .singleton }

    /// A server on 127.0.0.1:0 with our TLSHandler; each connection reports to `onConnection`.
    static func server(
        context: TLSContext, selector: TLSCertificateSelector? = nil, httpResponder: Bool = true, greeting: String? = nil,
        onConnection: @escaping @Sendable (Observations) -> Void = { _ in }
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let observations = Observations(eventLoop: channel.eventLoop)
                    onConnection(observations)
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(serverContext: context, certificateSelector: selector))
                    try channel.pipeline.syncOperations.addHandler(
                        RecordingHandler(observations: observations, httpResponder: httpResponder, greeting: greeting))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// A client connection through our TLSHandler; `send` is written before the handshake completes.
    static func client(
        port: Int, context: TLSContext, serverName: String? = "localhost", verifyHostname: String? = nil,
        sessionKey: String? = nil, verifier: TLSPeerVerifier? = nil, send: String? = nil
    ) async throws -> (any Channel, Observations) {
        let loop = group.next()
        let observations = Observations(eventLoop: loop)
        let channel = try await ClientBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(
                        clientContext: context, serverName: serverName, verifyHostname: verifyHostname,
                        sessionKey: sessionKey, verifier: verifier))
                    try channel.pipeline.syncOperations.addHandler(RecordingHandler(observations: observations))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        if let send {
            channel.writeAndFlush(ByteBuffer(string: send), promise: nil)
        }
        return (channel, observations)
    }
}

extension Channel {
    var port: Int { localAddress!.port! }
}
