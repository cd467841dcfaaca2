import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// A TLS 1.3 server's session ticket goes out with its first write, not in a
/// write of its own: one syscall and one wake-up of the client fewer per new
/// connection, and the client still resumes next time.
@Suite("TLS 1.3 session ticket", .blockingWaits)
struct SessionTicketTests {
    struct Connection {
        let client = EmbeddedChannel()
        let server = EmbeddedChannel()
        let clientSaw: Observations

        init(clientContext: TLSContext, serverContext: TLSContext) throws {
            clientSaw = Observations(eventLoop: client.eventLoop)
            try client.pipeline.syncOperations.addHandler(TLSHandler(clientContext: clientContext, serverName: "localhost"))
            try client.pipeline.syncOperations.addHandler(RecordingHandler(observations: clientSaw))
            try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: serverContext))
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
            _ = server.connect(to: address)
            _ = client.connect(to: address)
        }

        /// Hello, the server's flight, the client's Finished: what the server
        /// writes after reading that Finished is returned, not delivered.
        func handshake() throws -> ByteBuffer? {
            try server.writeInbound(try #require(try client.readOutbound(as: ByteBuffer.self)))
            try client.writeInbound(try #require(try server.readOutbound(as: ByteBuffer.self)))
            try server.writeInbound(try #require(try client.readOutbound(as: ByteBuffer.self)))
            return try server.readOutbound(as: ByteBuffer.self)
        }

        func finish() {
            _ = try? client.finish(acceptAlreadyClosed: true)
            _ = try? server.finish(acceptAlreadyClosed: true)
        }
    }

    @Test func theTicketGoesOutWithTheServersFirstWriteAndTheNextConnectionResumes() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let serverContext = try TLSServerTests.staticServerContext(pki, minimumVersion: .v1_3)
        let clientContext = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))

        let first = try Connection(clientContext: clientContext, serverContext: serverContext)
        defer { first.finish() }
        #expect(try first.handshake() == nil, "the server wrote its ticket on its own")
        #expect(first.clientSaw.handshake?.resumed == false)

        first.server.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"), promise: nil)
        let response = try #require(try first.server.readOutbound(as: ByteBuffer.self))
        #expect(try first.server.readOutbound(as: ByteBuffer.self) == nil, "one write: ticket and response together")
        try first.client.writeInbound(response)
        #expect(first.clientSaw.text == "HTTP/1.1 200 OK\r\n\r\n")

        // The ticket came with the response: the client kept it and offers it.
        let second = try Connection(clientContext: clientContext, serverContext: serverContext)
        defer { second.finish() }
        _ = try second.handshake()
        #expect(second.clientSaw.handshake?.resumed == true)
    }
}
