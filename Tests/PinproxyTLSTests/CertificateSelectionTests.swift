import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// The server's certificate chosen per connection (the interception leg):
/// served in the same step when the selector has it at hand, waited for when
/// its answer is a future, refused when it has none. Two EmbeddedChannels,
/// so "the same step" is exact: nothing runs that the test does not run.
@Suite("TLS certificate selection", .blockingWaits)
struct CertificateSelectionTests {
    struct Connection {
        let client = EmbeddedChannel()
        let server = EmbeddedChannel()
        let clientSaw: Observations
        let serverSaw: Observations
        let ca: CertificateAuthority

        init(selector: @escaping TLSCertificateSelector, ca: CertificateAuthority) throws {
            self.ca = ca
            clientSaw = Observations(eventLoop: client.eventLoop)
            serverSaw = Observations(eventLoop: server.eventLoop)
            let clientContext = try TLSContext(configuration: .client(trustRoots: .certificates([ca.certificate])))
            try client.pipeline.syncOperations.addHandler(TLSHandler(clientContext: clientContext, serverName: "api.example.test"))
            try client.pipeline.syncOperations.addHandler(RecordingHandler(observations: clientSaw))
            try server.pipeline.syncOperations.addHandler(TLSHandler(
                serverContext: try TLSContext(configuration: .server()), certificateSelector: selector))
            try server.pipeline.syncOperations.addHandler(RecordingHandler(observations: serverSaw))
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
            _ = server.connect(to: address)
            _ = client.connect(to: address)
        }

        /// The client's hello into the server, without running either loop:
        /// whether the server's first flight is out says whether it paused.
        func deliverClientHello() throws -> ByteBuffer? {
            let hello = try #require(try client.readOutbound(as: ByteBuffer.self))
            try server.writeInbound(hello)
            return try server.readOutbound(as: ByteBuffer.self)
        }

        /// The rest of the handshake, loops run between the moves.
        func interact(pendingFlight: ByteBuffer?) throws {
            if let pendingFlight { try client.writeInbound(pendingFlight) }
            var progress = true
            while progress {
                progress = false
                server.embeddedEventLoop.run()
                client.embeddedEventLoop.run()
                if let bytes = try server.readOutbound(as: ByteBuffer.self), client.isActive {
                    try client.writeInbound(bytes)
                    progress = true
                }
                if let bytes = try client.readOutbound(as: ByteBuffer.self), server.isActive {
                    try server.writeInbound(bytes)
                    progress = true
                }
            }
        }

        func finish() {
            _ = try? client.finish(acceptAlreadyClosed: true)
            _ = try? server.finish(acceptAlreadyClosed: true)
        }
    }

    @Test func aCertificateAtHandIsServedInTheStepThatReadTheClientHello() throws {
        let ca = try CertificateAuthority.create()
        let connection = try Connection(selector: { name, _ in .init(catching: { try ca.leaf(for: name ?? "none") }) }, ca: ca)
        defer { connection.finish() }

        // No event-loop tick between the hello and the server's answer: no
        // task, no future, no second pass through the handshake.
        let flight = try connection.deliverClientHello()
        #expect(flight != nil, "the server paused although its certificate was at hand")

        try connection.interact(pendingFlight: flight)
        let info = try #require(connection.clientSaw.handshake)
        #expect(info.verified)
        #expect(info.peerChain.first?.subject.contains("api.example.test") == true)
    }

    @Test func aCertificateStillToComeIsWaitedFor() throws {
        let ca = try CertificateAuthority.create()
        let promises = NIOLockedValueBox<[EventLoopPromise<TLSCertifiedKey>]>([])
        let asked = NIOLockedValueBox<[String?]>([])
        let connection = try Connection(selector: { name, loop in
            asked.withLockedValue { $0.append(name) }
            let promise = loop.makePromise(of: TLSCertifiedKey.self)
            promises.withLockedValue { $0.append(promise) }
            return .pending(promise.futureResult)
        }, ca: ca)
        defer { connection.finish() }

        #expect(try connection.deliverClientHello() == nil, "the server answered before it had a certificate")
        #expect(asked.withLockedValue { $0 } == ["api.example.test"])
        connection.server.embeddedEventLoop.run()
        #expect(try connection.server.readOutbound(as: ByteBuffer.self) == nil)

        let promise = try #require(promises.withLockedValue { $0.first })
        promise.succeed(try ca.leaf(for: "api.example.test"))
        try connection.interact(pendingFlight: nil)
        #expect(connection.clientSaw.handshake?.verified == true)
        #expect(asked.withLockedValue { $0 }.count == 1)
    }

    @Test func noCertificateFailsTheHandshakeWithTheSelectorsReason() throws {
        struct NoLeaf: Error, CustomStringConvertible { var description: String { "no leaf for this host" } }
        let ca = try CertificateAuthority.create()
        let connection = try Connection(selector: { _, _ in .failed(NoLeaf()) }, ca: ca)
        defer { connection.finish() }

        let flight = try connection.deliverClientHello()  // the alert
        try? connection.interact(pendingFlight: flight)
        #expect(connection.clientSaw.handshake == nil)
        let serverError = try #require(connection.serverSaw.errors.first as? TLSError)
        #expect("\(serverError)".contains("no leaf for this host"))
    }
}
