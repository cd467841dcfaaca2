import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Two EmbeddedChannels talking back to back: protocol logic without sockets or timing.
@Suite("TLS handler pair in memory", .blockingWaits)
struct HandlerPairTests {
    struct Pair {
        let client: EmbeddedChannel
        let server: EmbeddedChannel
        let clientSaw: Observations
        let serverSaw: Observations

        /// Moves bytes both ways until neither side has anything more to say.
        func interact() throws {
            var progress = true
            while progress {
                progress = false
                if let bytes = try client.readOutbound(as: ByteBuffer.self) {
                    if server.isActive { try server.writeInbound(bytes) }
                    progress = true
                }
                if let bytes = try server.readOutbound(as: ByteBuffer.self) {
                    if client.isActive { try client.writeInbound(bytes) }
                    progress = true
                }
                client.embeddedEventLoop.run()
                server.embeddedEventLoop.run()
            }
        }

        /// Closes both sides (if a test left them open) and runs their loops:
        /// until then each channel, its pipeline and its handlers hold one
        /// another and outlive the test.
        func finish() {
            _ = try? client.finish(acceptAlreadyClosed: true)
            _ = try? server.finish(acceptAlreadyClosed: true)
        }
    }

    static func makePair() throws -> (Pair, TemporaryDirectory) {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let client = EmbeddedChannel()
        let server = EmbeddedChannel()
        let clientSaw = Observations(eventLoop: client.eventLoop)
        let serverSaw = Observations(eventLoop: server.eventLoop)
        let clientContext = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        try client.pipeline.syncOperations.addHandler(TLSHandler(clientContext: clientContext, serverName: "localhost"))
        try client.pipeline.syncOperations.addHandler(RecordingHandler(observations: clientSaw))
        try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: try TLSServerTests.staticServerContext(pki)))
        try server.pipeline.syncOperations.addHandler(RecordingHandler(observations: serverSaw))
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        _ = server.connect(to: address)
        _ = client.connect(to: address)
        let pair = Pair(client: client, server: server, clientSaw: clientSaw, serverSaw: serverSaw)
        try pair.interact()
        return (pair, dir)
    }

    @Test func writesMadeBeforeTheHandshakeAreSentAfterItAndTheirPromisesComplete() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let client = EmbeddedChannel()
        let server = EmbeddedChannel()
        let clientSaw = Observations(eventLoop: client.eventLoop)
        let serverSaw = Observations(eventLoop: server.eventLoop)
        try client.pipeline.syncOperations.addHandler(TLSHandler(
            clientContext: try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate))), serverName: "localhost"))
        try client.pipeline.syncOperations.addHandler(RecordingHandler(observations: clientSaw))
        try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: try TLSServerTests.staticServerContext(pki)))
        try server.pipeline.syncOperations.addHandler(RecordingHandler(observations: serverSaw))

        let first = client.eventLoop.makePromise(of: Void.self)
        let second = client.eventLoop.makePromise(of: Void.self)
        client.write(ByteBuffer(string: "early "), promise: first)
        client.writeAndFlush(ByteBuffer(string: "bytes"), promise: second)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        _ = server.connect(to: address)
        _ = client.connect(to: address)
        let pair = Pair(client: client, server: server, clientSaw: clientSaw, serverSaw: serverSaw)
        defer { pair.finish() }
        try pair.interact()

        #expect(serverSaw.text == "early bytes")
        #expect(try first.futureResult.map { true }.wait())
        #expect(try second.futureResult.map { true }.wait())
        #expect(clientSaw.errors.isEmpty && serverSaw.errors.isEmpty)
    }

    @Test func closeNotifyIsAnsweredAndBothSidesCloseCleanly() throws {
        let (pair, _) = try Self.makePair()
        defer { pair.finish() }
        pair.client.writeAndFlush(ByteBuffer(string: "ping"), promise: nil)
        try pair.interact()
        pair.server.writeAndFlush(ByteBuffer(string: "pong"), promise: nil)
        try pair.interact()
        #expect(pair.serverSaw.text == "ping")
        #expect(pair.clientSaw.text == "pong")

        let closed = pair.client.close()
        try pair.interact()
        // The server read our close_notify, answered with its own, and closed.
        #expect(!pair.server.isActive)
        try closed.wait()
        #expect(pair.clientSaw.errors.isEmpty, "\(pair.clientSaw.errors)")
        #expect(pair.serverSaw.errors.isEmpty, "\(pair.serverSaw.errors)")
    }

    @Test func anEOFWithoutCloseNotifyIsReportedAsUnclean() throws {
        let (pair, _) = try Self.makePair()
        defer { pair.finish() }
        pair.client.writeAndFlush(ByteBuffer(string: "partial"), promise: nil)
        try pair.interact()
        // The transport goes away with no close_notify (a cut cable, a killed peer).
        pair.server.pipeline.fireChannelInactive()
        #expect(pair.serverSaw.errors.contains { ($0 as? TLSError) == .uncleanShutdown })
    }

    @Test func garbageInsteadOfTLSFailsTheHandshake() throws {
        let server = EmbeddedChannel()
        // The handler's failure closes the channel, but only a run of its
        // loop lets the pipeline drop its handlers and the channel.
        defer { _ = try? server.finish(acceptAlreadyClosed: true) }
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let saw = Observations(eventLoop: server.eventLoop)
        try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: try TLSServerTests.staticServerContext(pki)))
        try server.pipeline.syncOperations.addHandler(RecordingHandler(observations: saw))
        _ = server.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 443))
        _ = try? server.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        let failure = try #require(saw.errors.first as? TLSError)
        #expect(failure.kind == .tlsHandshake)
        #expect(failure.reason.contains("http request"), "\(failure)")
        #expect(!server.isActive)
    }
}
