import Foundation
import PinproxyTestSupport
import PinproxyTLS
import Testing

@Suite("SPKI pins, certificate hashes, and the CA's files")
struct PinAndCATests {
    @Test(arguments: TestPKI.KeyType.allCases)
    func spkiPinsMatchTheOpenSSLRecipe(keyType: TestPKI.KeyType) throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: keyType)
        for file in [pki.leafCertificate, pki.intermediateCertificate, pki.rootCertificate] {
            let certificate = try #require(try Certificate.loadPEM(file: file).first)
            #expect(certificate.spkiSHA256 == (try TestPKI.opensslSPKIPin(file)))
            let der = try ChildProcess.check("/bin/sh", ["-c", "openssl x509 -in '\(file)' -outform der | openssl dgst -sha256 -binary | base64"])
            #expect(certificate.certificateSHA256 == der.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let chain = try Certificate.loadPEM(file: pki.chainFile)
        #expect(chain.map(\.subject) == ["CN=localhost", "CN=Test Intermediate pki \(keyType.rawValue),O=pinproxy tests"])
    }

    @Test func aCreatedCAIsP256TenYearsWithAPrivateKeyFile() throws {
        let dir = try TemporaryDirectory()
        let (ca, created) = try CertificateAuthority.loadOrCreate(certificatePath: dir.file("state/ca.pem"), keyPath: dir.file("state/ca-key.pem"))
        #expect(created)
        var info = stat()
        #expect(stat(dir.file("state/ca-key.pem"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let text = try ChildProcess.check("openssl", ["x509", "-in", dir.file("state/ca.pem"), "-noout", "-text"])
        #expect(text.contains("ASN1 OID: prime256v1"))
        #expect(text.contains("CA:TRUE"))
        #expect(text.contains("Signature Algorithm: ecdsa-with-SHA256"))
        let years = ca.certificate.notAfter.timeIntervalSince(Date()) / (365.25 * 86_400)
        #expect(years > 9.99 && years < 10.01)

        // A second start loads the same CA rather than making another.
        let (again, createdAgain) = try CertificateAuthority.loadOrCreate(certificatePath: dir.file("state/ca.pem"), keyPath: dir.file("state/ca-key.pem"))
        #expect(!createdAgain)
        #expect(again.certificate == ca.certificate)
    }

    @Test func aKeyReadableByOthersIsRefusedNamingTheFile() throws {
        let dir = try TemporaryDirectory()
        let ca = try CertificateAuthority.create()
        try ca.write(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        chmod(dir.file("ca-key.pem"), 0o644)
        #expect(throws: TLSError.configuration("CA key \(dir.file("ca-key.pem")) is readable by group or others (mode 644); run: chmod 600 \(dir.file("ca-key.pem"))")) {
            try CertificateAuthority.load(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        }
    }

    @Test func onlyOneOfTheTwoFilesIsAnErrorNotANewCA() throws {
        let dir = try TemporaryDirectory()
        try dir.write("ca.pem", try CertificateAuthority.create().certificate.pemString)
        #expect(throws: TLSError.self) {
            try CertificateAuthority.loadOrCreate(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("ca-key.pem")))
    }

    @Test func writingNeverReplacesAnExistingKey() throws {
        let dir = try TemporaryDirectory()
        try dir.write("ca-key.pem", "precious")
        #expect(throws: TLSError.self) {
            try CertificateAuthority.create().write(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        }
        #expect(try String(contentsOfFile: dir.file("ca-key.pem"), encoding: .utf8) == "precious")
    }
}
