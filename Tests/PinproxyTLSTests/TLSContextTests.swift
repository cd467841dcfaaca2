@testable import PinproxyTLS
import Testing

@Suite("TLS contexts reject what OpenSSL would not honour")
struct TLSContextTests {
    private func error(_ configuration: TLSConfiguration) -> TLSError? {
        do {
            _ = try TLSContext(configuration: configuration)
            return nil
        } catch let error as TLSError {
            return error
        } catch {
            return .tlsHandshake("unexpected \(error)")
        }
    }

    @Test func aCipherStringWithAnUnknownElementIsRejectedWithOpenSSLsReason() {
        var configuration = TLSConfiguration.client()
        configuration.cipherList = "ECDHE+AESGCM:NOT-A-CIPHER"
        let failure = error(configuration)
        #expect(failure?.kind == .configuration)
        #expect(failure?.reason.contains("\"NOT-A-CIPHER\" matches no cipher OpenSSL knows") == true)
        #expect(failure?.reason.contains("no cipher match") == true)
    }

    @Test func aCipherStringOfOnlyExclusionsSelectsNothingAndIsRejected() {
        var configuration = TLSConfiguration.client()
        configuration.cipherList = "!ALL"
        #expect(error(configuration)?.reason.contains("selects no cipher") == true)
    }

    @Test func validCipherStringsAndSuitesBuild() {
        var configuration = TLSConfiguration.client()
        configuration.cipherList = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:@STRENGTH"
        configuration.cipherSuites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"
        #expect(error(configuration) == nil)
    }

    @Test func anUnknownTLS13SuiteIsRejectedWithASuggestion() {
        var configuration = TLSConfiguration.client()
        configuration.cipherSuites = "tls_aes_128_gcm_sha256"
        #expect(error(configuration)?.reason == "unknown TLS 1.3 ciphersuite \"tls_aes_128_gcm_sha256\" (did you mean TLS_AES_128_GCM_SHA256?)")
    }

    @Test func aMaximumBelowTheMinimumIsRejected() {
        var configuration = TLSConfiguration.client(minimumVersion: .v1_3)
        configuration.maximumVersion = .v1_2
        #expect(error(configuration)?.reason == "maximum TLS version 1.2 is below the minimum 1.3")
    }

    @Test func aMissingTrustFileIsNamed() {
        let failure = error(.client(trustRoots: .file("/nonexistent/ca.pem")))
        #expect(failure?.reason == "cannot read /nonexistent/ca.pem: no such file")
    }

    @Test func versionsParseAsPoliciesSpellThem() {
        #expect(TLSVersion(parsing: "1.3") == .v1_3)
        #expect(TLSVersion(parsing: "TLSv1.2") == .v1_2)
        #expect(TLSVersion(parsing: "1.4") == nil)
        #expect(TLSVersion.v1_1.isLegacy && !TLSVersion.v1_2.isLegacy)
    }
}

/// The upstream context's own floor (docs/contract.md §3), whatever config
/// validation let through: it never offers a cipher that does not encrypt or
/// does not authenticate, and a `@SECLEVEL` in the string cannot lower it.
struct CipherFloorTests {
    @Test func aContextBuiltWithoutTheCipherCheckStillOffersNoNullOrAnonymousCipher() throws {
        let configuration = TLSConfiguration(role: .client, maximumVersion: .v1_2, cipherList: "ALL:eNULL:aNULL:@SECLEVEL=0")
        let context = try TLSContext(configuration: configuration, trustStores: nil, checkingCipherPolicy: false)
        let offered = context.offeredCiphers
        #expect(!offered.isEmpty)
        #expect(offered.allSatisfy { $0.encrypts && $0.authenticates }, "\(offered.map(\.name))")
    }

    @Test func theCheckedInitialiserRefusesTheSameString() {
        let configuration = TLSConfiguration(role: .client, maximumVersion: .v1_2, cipherList: "ALL:eNULL:@SECLEVEL=0")
        #expect(throws: TLSError.self) { try TLSContext(configuration: configuration) }
    }
}
