import Foundation
import NIOCore
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Our server handler against real clients (openssl s_client, curl) and our
/// own client handler, with certificates minted per SNI by the interception CA.
@Suite("TLS server handler and SNI minting", .blockingWaits)
struct TLSServerTests {
    /// Serves leaves minted by `ca` for whatever SNI the client sends.
    static func mintingSelector(_ ca: CertificateAuthority, fallback: String = "localhost") -> TLSCertificateSelector {
        { serverName, _ in
            .init(catching: { try ca.leaf(for: serverName ?? fallback) })
        }
    }

    static func staticServerContext(_ pki: TestPKI, minimumVersion: TLSVersion = .v1_2) throws -> TLSContext {
        try TLSContext(configuration: .server(
            certificateChain: try Certificate.loadPEM(file: pki.chainFile),
            privateKey: try PrivateKey(pemFile: pki.leafKey),
            minimumVersion: minimumVersion))
    }

    @Test(arguments: [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")])
    func opensslSClientVerifiesAMintedLeafServedBySNI(flag: String, expected: String) async throws {
        let dir = try TemporaryDirectory()
        let ca = try CertificateAuthority.create()
        let caFile = try dir.write("ca.pem", ca.certificate.pemString)
        let server = try await Loopback.server(context: try TLSContext(configuration: .server()), selector: Self.mintingSelector(ca))
        defer { server.close(promise: nil) }

        let (status, output) = try ChildProcess.run("openssl", [
            "s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "api.example.test",
            "-verify_hostname", "api.example.test", "-CAfile", caFile, "-verify_return_error", flag, "-brief", "-ign_eof",
        ], input: "GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        #expect(status == 0, "\(output)")
        #expect(output.contains("Verification: OK"))
        #expect(output.contains("Protocol version: \(expected)"))
        #expect(output.contains("Peer certificate: CN = api.example.test"))
        #expect(output.contains("hello from pinproxy tls"))
    }

    @Test func curlTrustsAMintedLeafForAnIPAddress() async throws {
        let dir = try TemporaryDirectory()
        let ca = try CertificateAuthority.create()
        let caFile = try dir.write("ca.pem", ca.certificate.pemString)
        // curl sends no SNI for an IP literal: the selector's fallback names the leaf.
        let server = try await Loopback.server(context: try TLSContext(configuration: .server()),
                                               selector: Self.mintingSelector(ca, fallback: "127.0.0.1"))
        defer { server.close(promise: nil) }
        let (status, output) = try ChildProcess.run("curl", ["-sS", "--cacert", caFile, "https://127.0.0.1:\(server.port)/"])
        #expect(status == 0, "\(output)")
        #expect(output == "hello from pinproxy tls")
    }

    @Test func curlAgainstAStaticRSAChainWithAnIntermediate() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: .rsa)
        let server = try await Loopback.server(context: try Self.staticServerContext(pki))
        defer { server.close(promise: nil) }
        let (status, output) = try ChildProcess.run("curl", [
            "-sS", "--cacert", pki.rootCertificate, "--resolve", "localhost:\(server.port):127.0.0.1",
            "https://localhost:\(server.port)/",
        ])
        #expect(status == 0, "\(output)")
        #expect(output == "hello from pinproxy tls")
    }

    @Test func aMintedLeafVerifiesWithOpenSSLAndCarriesTheSANAskedFor() throws {
        let dir = try TemporaryDirectory()
        let ca = try CertificateAuthority.create()
        let caFile = try dir.write("ca.pem", ca.certificate.pemString)
        for name in ["api.spotify.com", "10.1.2.3", "::1"] {
            let leaf = try ca.leaf(for: name).chain[0]
            let leafFile = try dir.write("leaf-\(name).pem", leaf.pemString)
            #expect(try ChildProcess.check("openssl", ["verify", "-CAfile", caFile, leafFile]).contains(": OK"))
            let isIP = name.contains(":") || name.first!.isNumber
            let expectedSAN = isIP ? "IP Address:\(name == "::1" ? "0:0:0:0:0:0:0:1" : name)" : "DNS:\(name)"
            let text = try ChildProcess.check("openssl", ["x509", "-in", leafFile, "-noout", "-ext", "subjectAltName"])
            #expect(text.contains(expectedSAN), "\(text)")
            #expect(leaf.subjectAlternativeNames == [name])
            // Days, not years; never the CA's key.
            let days = leaf.notAfter.timeIntervalSince(Date()) / 86_400
            #expect(days > 6 && days <= 7.01)
            #expect(leaf.spkiSHA256 != ca.certificate.spkiSHA256)
        }
    }

    @Test func oneThousandDistinctNamesKeepTheCacheAtItsBound() throws {
        let mismatched = try CertificateAuthority.create().certificate
        #expect {
            try CertificateAuthority(certificate: mismatched, key: try PrivateKey.generateP256())
        } throws: { error in
            (error as? TLSError)?.reason.hasPrefix("the CA key does not belong to the CA certificate \(mismatched.subject):") == true
        }

        let bounded = try CertificateAuthority.create()
        let small = try CertificateAuthority(certificate: bounded.certificate, key: Self.caKey(bounded), cacheCapacity: 100)
        var leafKeys = Set<String>()
        for i in 0..<1000 {
            leafKeys.insert(try small.leaf(for: "host\(i).example.test").chain[0].spkiSHA256)
        }
        #expect(small.cachedCount == 100)
        #expect(small.mintedCount == 1000)
        #expect(leafKeys.count == 1, "one process-wide leaf key")
        // The most recent names are served from the cache, the oldest are minted again.
        _ = try small.leaf(for: "host999.example.test")
        #expect(small.mintedCount == 1000)
        _ = try small.leaf(for: "host0.example.test")
        #expect(small.mintedCount == 1001)
    }

    @Test func theVerifierSeesLeafToRootAndARejectionStopsAllApplicationData() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let serverSide = NIOLockedBox<[Observations]>([])
        // The server speaks first, the moment its handshake completes.
        let server = try await Loopback.server(context: try Self.staticServerContext(pki), httpResponder: false,
                                               greeting: "server speaks first", onConnection: { o in serverSide.mutate { $0.append(o) } })
        defer { server.close(promise: nil) }
        struct PinRejected: Error, Sendable, Equatable {}
        let seen = NIOLockedBox<[String]>([])
        let context = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        let (_, client) = try await Loopback.client(
            port: server.port, context: context,
            verifier: { info in
                seen.set(info.peerChain.map(\.spkiSHA256))
                return .reject(PinRejected())
            },
            send: "client secret request")
        await #expect(throws: PinRejected.self) { try await client.handshakeCompleted.futureResult.get() }
        try await client.closed.futureResult.get()
        let server0 = try #require(serverSide.value.first)
        try await server0.closed.futureResult.get()

        #expect(seen.value == [pki.leafCertificate, pki.intermediateCertificate, pki.rootCertificate].map { try! TestPKI.opensslSPKIPin($0) })
        #expect(client.bytes.isEmpty, "no server byte reached the client app")
        #expect(server0.bytes.isEmpty, "no client byte reached the server app")
    }

    @Test func aSecondConnectionResumesTheSession() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try await Loopback.server(context: try Self.staticServerContext(pki))
        defer { server.close(promise: nil) }
        let context = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        var resumed: [Bool] = []
        for _ in 0..<3 {
            let (_, client) = try await Loopback.client(port: server.port, context: context, send: "GET / HTTP/1.1\r\n\r\n")
            resumed.append(try await client.handshakeCompleted.futureResult.get().resumed)
            try await client.closed.futureResult.get()  // reads the response, and the TLS 1.3 ticket with it
            #expect(client.text.hasSuffix("hello from pinproxy tls"))
        }
        #expect(resumed == [false, true, true])
    }

    private static func caKey(_ ca: CertificateAuthority) throws -> PrivateKey {
        let dir = try TemporaryDirectory()
        try ca.write(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        return try PrivateKey(pemFile: dir.file("ca-key.pem"))
    }
}
