import Foundation
import NIOCore
import NIOEmbedded
import PinproxyTLS

/// Target `tls`: records from the far side into `TLSHandler`. The first byte
/// picks the side (bit 0: 0 the interception server, which mints a leaf for
/// the SNI; 1 the upstream client, which verifies against a test CA), whether
/// the near side also writes application data after each read (bit 1), and
/// how it ends (bit 2: the near side closes; else the far side goes away).
/// The rest, cut into reads, is what the far side sends.
enum TLSTarget {
    static let ca = try! CertificateAuthority.create()
    static let serverContext = try! TLSContext(configuration: .server(minimumVersion: .v1_2))
    static let clientContext = try! TLSContext(configuration: TLSConfiguration(
        role: .client, minimumVersion: .v1_2, trustRoots: .certificates([ca.certificate])))
    static let clientContext12 = try! TLSContext(configuration: TLSConfiguration(
        role: .client, minimumVersion: .v1_2, maximumVersion: .v1_2, trustRoots: .certificates([ca.certificate])))

    static func serverHandler() -> TLSHandler {
        try! TLSHandler(serverContext: serverContext) { serverName, _ in
            .init(catching: { try ca.leaf(for: serverName ?? "fuzz.test") })
        }
    }

    static func clientHandler(_ context: TLSContext = clientContext) -> TLSHandler {
        try! TLSHandler(clientContext: context, serverName: "fuzz.test")
    }

    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try! channel.pipeline.syncOperations.addHandler(mode & 1 == 0 ? serverHandler() : clientHandler())
        channel.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 443), promise: nil)
        loop.run()
        for segment in FuzzInput.segments(input.dropFirst()) {
            guard channel.isActive else { break }
            _ = try? channel.writeInbound(ByteBuffer(bytes: segment))
            if mode & 2 != 0, channel.isActive {
                channel.writeAndFlush(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"), promise: nil)
            }
            loop.run()
            while let _ = try? channel.readOutbound(as: ByteBuffer.self) {}
            while let _ = try? channel.readInbound(as: ByteBuffer.self) {}
        }
        if mode & 4 != 0 {
            channel.close(promise: nil)
        } else {
            channel.pipeline.fireChannelInactive()
        }
        loop.run()
        _ = try? channel.finish(acceptAlreadyClosed: true)
        try? loop.syncShutdownGracefully()
    }

    /// Seeds: real handshakes between a client and a server handler (TLS 1.3
    /// and 1.2), each side's view of the other's flights, one read per flight.
    static func writeSeeds(to directory: String) {
        for (name, context) in [("13", clientContext), ("12", clientContext12)] {
            let loop = EmbeddedEventLoop()
            let client = EmbeddedChannel(handler: clientHandler(context), loop: loop)
            let server = EmbeddedChannel(handler: serverHandler(), loop: loop)
            server.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 1), promise: nil)
            client.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 443), promise: nil)
            var toServer: [[UInt8]] = []
            var toClient: [[UInt8]] = []
            for round in 0..<8 {
                loop.run()
                var flight: [UInt8] = []
                while let buffer = try? client.readOutbound(as: ByteBuffer.self) { flight += buffer.readableBytesView }
                if !flight.isEmpty { toServer.append(flight); _ = try? server.writeInbound(ByteBuffer(bytes: flight)) }
                loop.run()
                flight = []
                while let buffer = try? server.readOutbound(as: ByteBuffer.self) { flight += buffer.readableBytesView }
                if !flight.isEmpty { toClient.append(flight); _ = try? client.writeInbound(ByteBuffer(bytes: flight)) }
                if round == 3 {
                    client.writeAndFlush(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"), promise: nil)
                    server.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"), promise: nil)
                }
            }
            let join = { (flights: [[UInt8]]) in Array(flights.joined(separator: FuzzInput.separator)) }
            _ = FileManager.default.createFile(atPath: "\(directory)/handshake\(name)-server", contents: Data([0x00] + join(toServer)))
            _ = FileManager.default.createFile(atPath: "\(directory)/handshake\(name)-client", contents: Data([0x01] + join(toClient)))
            _ = FileManager.default.createFile(atPath: "\(directory)/handshake\(name)-client-writes", contents: Data([0x03] + join(toClient)))
            _ = try? client.finish(acceptAlreadyClosed: true)
            _ = try? server.finish(acceptAlreadyClosed: true)
        }
    }
}
