import Foundation
import PinproxyTestSupport
@testable import PinproxyTLS
import Testing

/// A first start killed while it creates the CA must never leave a state
/// that blocks the next start: whatever step it stopped after, the next
/// `loadOrCreate` either creates a CA or uses the one being written, and
/// the key it uses is 0600.
@Suite("Creating the CA survives an interruption at any step")
struct CAFileCrashTests {
    @Test(arguments: Array(1...CAFiles.stepCount))
    func aStartStoppedAfterAnyStepIsFollowedByAWorkingStart(stoppedAfter: Int) throws {
        let dir = try TemporaryDirectory()
        let files = CAFiles(certificatePath: dir.file("state/ca.pem"), keyPath: dir.file("state/ca-key.pem"))
        let first = try CertificateAuthority.create()
        #expect(throws: CAFiles.Interrupted.self) { try files.write(first, stopAfter: stoppedAfter) }

        let (ca, _) = try CertificateAuthority.loadOrCreate(certificatePath: files.certificatePath, keyPath: files.keyPath)
        #expect(TextFile.permissions(files.keyPath) == 0o600)
        if stoppedAfter >= 3 {
            // The key had its name: it is the one kept, never a second CA.
            #expect(ca.certificate == first.certificate)
        }
        #expect(!FileManager.default.fileExists(atPath: files.keyTemporary), "no stray copy of the private key")
        #expect(!FileManager.default.fileExists(atPath: files.certificateTemporary))
        let (again, created) = try CertificateAuthority.loadOrCreate(certificatePath: files.certificatePath, keyPath: files.keyPath)
        #expect(!created)
        #expect(again.certificate == ca.certificate)
    }
}
