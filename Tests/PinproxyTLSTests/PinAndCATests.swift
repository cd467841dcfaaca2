import Foundation
import PinproxyTestSupport
import PinproxyTLS
import Testing

@Suite("SPKI pins, certificate hashes, and the CA's files", .blockingWaits)
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
        #expect(TextFile.permissions(dir.file("state/ca-key.pem")) == 0o600)
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

/// What a stopped first start used to leave: the key written, the
/// certificate not, and every later start refused.
@Suite("A CA creation that fails half way leaves nothing behind", .blockingWaits)
struct CACreationFailureTests {
    @Test func aCertificateThatCannotBeWrittenLeavesNoKeyBehind() throws {
        let dir = try TemporaryDirectory()
        // The certificate's directory is a plain file: its write fails after
        // the key's (as a kill between the two would stop it).
        try dir.write("certs", "not a directory")
        let certificate = dir.file("certs/ca.pem"), key = dir.file("keys/ca-key.pem")
        #expect(throws: TLSError.self) { try CertificateAuthority.loadOrCreate(certificatePath: certificate, keyPath: key) }
        #expect(!FileManager.default.fileExists(atPath: key), "a key without its certificate blocks every later start")

        try FileManager.default.removeItem(atPath: dir.file("certs"))
        let (_, created) = try CertificateAuthority.loadOrCreate(certificatePath: certificate, keyPath: key)
        #expect(created)
    }

    @Test func aHalfCAFromAnOlderStartNamesBothFilesAndWhatToDo() throws {
        let dir = try TemporaryDirectory()
        try CertificateAuthority.create().write(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        try FileManager.default.removeItem(atPath: dir.file("ca.pem"))
        let error = #expect(throws: TLSError.self) {
            try CertificateAuthority.loadOrCreate(certificatePath: dir.file("ca.pem"), keyPath: dir.file("ca-key.pem"))
        }
        let reason = error?.reason ?? ""
        #expect(reason.contains("CA key \(dir.file("ca-key.pem")) exists but its certificate \(dir.file("ca.pem")) does not"))
        #expect(reason.contains("remove \(dir.file("ca-key.pem")) and start again to create a new CA"))
        #expect(reason.contains("restore \(dir.file("ca.pem")) from a backup"))
    }
}
