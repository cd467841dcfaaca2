import Foundation
import NIOCore
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Our client handler against a real `openssl s_server`.
@Suite("TLS client handler against openssl s_server", .blockingWaits)
struct TLSClientAgainstOpenSSLTests {
    static let matrix: [(TestPKI.KeyType, TLSVersion)] = [(.ecdsa, .v1_2), (.ecdsa, .v1_3), (.rsa, .v1_2), (.rsa, .v1_3)]

    @Test(arguments: matrix)
    func handshakesVerifiesTheChainAndExchangesData(keyType: TestPKI.KeyType, version: TLSVersion) async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: keyType)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }

        var configuration = TLSConfiguration.client(minimumVersion: version, trustRoots: .file(pki.rootCertificate))
        configuration.maximumVersion = version
        let context = try TLSContext(configuration: configuration)
        let seen = NIOLockedBox<[String]>([])
        let (channel, observations) = try await Loopback.client(
            port: server.port, context: context,
            verifier: { info in
                seen.set(info.peerChain.map(\.subject))
                return .accept
            },
            send: "GET / HTTP/1.0\r\n\r\n")
        let info = try await observations.handshakeCompleted.futureResult.get()
        try await observations.closed.futureResult.get()
        _ = channel

        #expect(info.version == version)
        #expect(info.verified)
        // leaf → intermediate → root, as OpenSSL verified it.
        #expect(seen.value.count == 3)
        #expect(seen.value.first == "CN=localhost")
        #expect(seen.value.last?.contains("Test Root") == true)
        #expect(info.leafNotAfter != nil)
        #expect(!info.cipher.isEmpty)
        #expect(observations.text.contains("HTTP/1.0 200 ok"))
        #expect(observations.text.contains(version == .v1_3 ? "Protocol  : TLSv1.3" : "Protocol  : TLSv1.2"))
    }

    @Test func aTLS13MinimumAgainstATLS12OnlyServerFailsWithTheVersionError() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey,
                                       chain: pki.intermediateCertificate, arguments: ["-www", "-tls1_2"])
        defer { server.stop() }
        let context = try TLSContext(configuration: .client(minimumVersion: .v1_3, trustRoots: .file(pki.rootCertificate)))
        let (_, observations) = try await Loopback.client(port: server.port, context: context)
        let error = await #expect(throws: TLSError.self) { try await observations.handshakeCompleted.futureResult.get() }
        #expect(error?.kind == .tlsVersion)
    }

    @Test func disjointCipherListsFailWithTheCipherError() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate,
                                       arguments: ["-www", "-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"])
        defer { server.stop() }
        var configuration = TLSConfiguration.client(trustRoots: .file(pki.rootCertificate))
        configuration.maximumVersion = .v1_2
        configuration.cipherList = "ECDHE-ECDSA-AES128-GCM-SHA256"
        let (_, observations) = try await Loopback.client(port: server.port, context: try TLSContext(configuration: configuration))
        let error = await #expect(throws: TLSError.self) { try await observations.handshakeCompleted.futureResult.get() }
        #expect(error?.kind == .tlsCipher)
    }

    @Test func disjointTLS13SuitesFailWithTheCipherError() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate,
                                       arguments: ["-www", "-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"])
        defer { server.stop() }
        var configuration = TLSConfiguration.client(minimumVersion: .v1_3, trustRoots: .file(pki.rootCertificate))
        configuration.cipherSuites = "TLS_AES_256_GCM_SHA384"
        let (_, observations) = try await Loopback.client(port: server.port, context: try TLSContext(configuration: configuration))
        let error = await #expect(throws: TLSError.self) { try await observations.handshakeCompleted.futureResult.get() }
        #expect(error?.kind == .tlsCipher)
    }

    @Test func anUntrustedChainFailsVerification() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let other = try TestPKI.make(in: dir, name: "other")
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }
        let context = try TLSContext(configuration: .client(trustRoots: .file(other.rootCertificate)))
        let (_, observations) = try await Loopback.client(port: server.port, context: context)
        let error = await #expect(throws: TLSError.self) { try await observations.handshakeCompleted.futureResult.get() }
        #expect(error == .verifyFailed("unable to get local issuer certificate"))
    }

    @Test func aWrongHostnameFailsVerification() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }
        let context = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        let (_, observations) = try await Loopback.client(port: server.port, context: context, serverName: "api.example.com")
        let error = await #expect(throws: TLSError.self) { try await observations.handshakeCompleted.futureResult.get() }
        #expect(error == .verifyFailed("hostname mismatch"))
    }

    @Test func anIPLiteralIsVerifiedAgainstTheIPSAN() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }
        let context = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        let (_, observations) = try await Loopback.client(port: server.port, context: context, serverName: "127.0.0.1")
        let info = try await observations.handshakeCompleted.futureResult.get()
        #expect(info.verified)
        #expect(info.serverName == nil)  // no SNI for an IP literal
    }
}

/// A tiny locked box for values set inside `@Sendable` closures.
final class NIOLockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: Value
    init(_ value: Value) { _value = value }
    var value: Value { lock.withLock { _value } }
    func set(_ value: Value) { lock.withLock { _value = value } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&_value) } }
}
