import Foundation
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// An interception CA that is an intermediate (docs/contract.md §3
/// "Interception certificates"): its leaves go out with the intermediate and
/// never the root, and OpenSSL's own `verify` accepts them against the root alone.
@Suite("Minting under an intermediate CA", .blockingWaits)
struct IntermediateCAMintingTests {
    @Test func leavesAreServedWithTheIntermediateAndVerifyAgainstTheRootAlone() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        chmod(pki.intermediateKey, 0o600)
        let ca = try CertificateAuthority.load(certificatePath: pki.intermediateCertificate, keyPath: pki.intermediateKey,
                                               chainPath: pki.rootCertificate)
        let served = try ca.leaf(for: "minted.test").chain
        let intermediate = try Certificate.loadPEM(file: pki.intermediateCertificate)[0]
        let root = try Certificate.loadPEM(file: pki.rootCertificate)[0]
        #expect(served.count == 2)
        #expect(served.last == intermediate)
        #expect(!served.contains(root))

        try dir.write("leaf.pem", served[0].pemString)
        try dir.write("untrusted.pem", served.dropFirst().map(\.pemString).joined())
        let verdict = try ChildProcess.check("openssl", [
            "verify", "-CAfile", pki.rootCertificate, "-untrusted", dir.file("untrusted.pem"), "-purpose", "sslserver",
            "-verify_hostname", "minted.test", dir.file("leaf.pem"),
        ])
        #expect(verdict.contains(": OK"), "\(verdict)")
    }

    @Test func aSelfSignedCAServesTheLeafAlone() throws {
        let served = try CertificateAuthority.create().leaf(for: "alone.test").chain
        #expect(served.count == 1)
    }

    @Test func aCertificateThatIsNoCAAKeyOfAnotherAndAChainThatDoesNotChainAreEachNamed() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let other = try TestPKI.make(in: dir, name: "other")
        let intermediate = try Certificate.loadPEM(file: pki.intermediateCertificate)[0]
        let key = try PrivateKey(pemFile: pki.intermediateKey)
        let root = try Certificate.loadPEM(file: pki.rootCertificate)[0]
        let leaf = try Certificate.loadPEM(file: pki.leafCertificate)[0]

        #expect(CertificateAuthority.problems(certificate: intermediate, key: key, chain: [root]).isEmpty)
        #expect(CertificateAuthority.problems(certificate: leaf, key: try PrivateKey(pemFile: pki.leafKey), chain: [intermediate, root])
            .map(\.field) == [.certificate])
        #expect(CertificateAuthority.problems(certificate: intermediate, key: try PrivateKey(pemFile: other.intermediateKey), chain: [root])
            .map(\.field) == [.key])
        let otherRoot = try Certificate.loadPEM(file: other.rootCertificate)[0]
        #expect(CertificateAuthority.problems(certificate: intermediate, key: key, chain: [otherRoot]).map(\.field) == [.chain])
        // A chain listed top-down is not a chain.
        #expect(CertificateAuthority.problems(certificate: leaf, key: nil, chain: [root, intermediate]).map(\.field) == [.certificate, .chain])
    }
}
