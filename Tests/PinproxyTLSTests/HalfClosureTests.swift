import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// On a half-closure the server answers after the client's close_notify. Lives
/// on its channel's loop; the test thread reads only its locked counters.
final class AnswerOnInputClosed: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let received = NIOLockedValueBox("")
    let inputClosedEvents = NIOLockedValueBox(0)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let text = String(buffer: unwrapInboundIn(data))
        received.withLockedValue { $0 += text }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            return context.fireUserInboundEventTriggered(event)
        }
        inputClosedEvents.withLockedValue { $0 += 1 }
        let answer = "got \(received.withLockedValue { $0.count }) bytes after your half-close"
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

@Suite("TLS half-closure on real sockets", .blockingWaits)
struct HalfClosureTests {
    @Test func theServerKeepsWritingAfterTheClientsCloseNotify() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let answerer = NIOLockedValueBox<AnswerOnInputClosed?>(nil)
        let serverContext = try TLSServerTests.staticServerContext(pki)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = AnswerOnInputClosed()
                    answerer.withLockedValue { $0 = handler }
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(serverContext: serverContext))
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }

        let context = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        let (channel, client) = try await Loopback.client(port: server.port, context: context, send: "0123456789")
        _ = try await client.handshakeCompleted.futureResult.get()
        try await channel.close(mode: .output)
        try await client.closed.futureResult.get()

        #expect(client.text == "got 10 bytes after your half-close")
        #expect(client.errors.isEmpty, "\(client.errors)")
        #expect(answerer.withLockedValue { $0?.inputClosedEvents.withLockedValue { $0 } } == 1)
    }
}
