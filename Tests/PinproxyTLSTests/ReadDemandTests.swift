import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Counts the `read()` calls that reach the socket side of the pipeline.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    private(set) var reads = 0

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

/// Asks for more (one `read()`) while it handles each piece of plaintext, as
/// a handler on an `autoRead: false` channel does, and asks for nothing else.
final class ReadAgainWhileReading: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private(set) var received = ""

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received += String(buffer: unwrapInboundIn(data))
        context.read()
    }
}

@Suite("TLS handler read demand", .blockingWaits)
struct ReadDemandTests {
    /// An app that asked for more while reading one record must get it even
    /// when the next bytes from the socket are only part of a record: the
    /// handler owes the socket a `read()` for the rest. (It forgot the app's
    /// demand at the end of the burst, and a channel without autoRead stalled.)
    @Test func aReadAskedForWhileReadingSurvivesABurstWithOnlyPartOfARecord() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let client = EmbeddedChannel()
        let server = EmbeddedChannel()
        defer {
            // Closed and run, so each pipeline lets go of its handlers and its channel.
            _ = try? client.finish(acceptAlreadyClosed: true)
            _ = try? server.finish(acceptAlreadyClosed: true)
        }
        let counter = ReadCounter()
        let app = ReadAgainWhileReading()
        try client.pipeline.syncOperations.addHandler(TLSHandler(
            clientContext: try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate))), serverName: "localhost"))
        try server.pipeline.syncOperations.addHandler(counter)
        try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: try TLSServerTests.staticServerContext(pki)))
        try server.pipeline.syncOperations.addHandler(app)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        _ = server.connect(to: address)
        _ = client.connect(to: address)
        try shuttle(client, server)

        // First record, in a burst of its own: the app reads it and asks for more.
        client.writeAndFlush(ByteBuffer(string: "first"), promise: nil)
        let first = try #require(try client.readOutbound(as: ByteBuffer.self))
        try server.writeInbound(first)
        #expect(app.received == "first")

        // (writeInbound ends each burst with channelReadComplete.)
        // The second record arrives in two bursts; after the first half the
        // handler must ask the socket for the rest.
        client.writeAndFlush(ByteBuffer(string: "second"), promise: nil)
        var second = try #require(try client.readOutbound(as: ByteBuffer.self))
        let halfLength = second.readableBytes / 2
        let half = second.readSlice(length: halfLength)!
        let readsBefore = counter.reads
        try server.writeInbound(half)
        #expect(counter.reads == readsBefore + 1, "no read() was issued for the rest of the record")

        try server.writeInbound(second)
        #expect(app.received == "firstsecond")
    }

    /// Moves bytes both ways until neither side has anything more to say.
    private func shuttle(_ client: EmbeddedChannel, _ server: EmbeddedChannel) throws {
        var progress = true
        while progress {
            progress = false
            if let bytes = try client.readOutbound(as: ByteBuffer.self) {
                try server.writeInbound(bytes)
                progress = true
            }
            if let bytes = try server.readOutbound(as: ByteBuffer.self) {
                try client.writeInbound(bytes)
                progress = true
            }
        }
    }
}
