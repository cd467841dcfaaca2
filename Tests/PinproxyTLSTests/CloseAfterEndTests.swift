import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

@Suite("TLS handler close after the connection ended", .blockingWaits)
struct CloseAfterEndTests {
    /// Once TLS has seen the connection end, a close still reaches the
    /// channel, which answers it: the handler never swallows it. (It failed
    /// the close itself, so a channel that had seen `channelInactive` without
    /// closing stayed open, with its pipeline and OpenSSL state, for ever.)
    @Test func aCloseAfterTheEndStillReachesTheChannel() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let channel = EmbeddedChannel(handler: try TLSHandler(
            clientContext: try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate))), serverName: "localhost"))
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        channel.pipeline.fireChannelInactive()
        channel.embeddedEventLoop.run()
        let closed = channel.close()
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive, "the close stopped at the TLS handler")
        #expect(throws: Never.self) { try closed.wait() }
    }
}
