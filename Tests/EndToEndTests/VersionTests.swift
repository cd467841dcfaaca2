import Foundation
import PinproxyTestSupport
import Testing

@Suite("pinproxy --version", .blockingWaits)
struct VersionTests {
    /// The release, the commit (unknown in a test build, which sets no
    /// PINPROXY_COMMIT, and saying why), and the OpenSSL library in use.
    @Test func versionNamesTheReleaseTheCommitAndOpenSSL() throws {
        let (status, out, err) = try PinproxyBinary.run(["--version"])
        #expect(status == 0, "\(err)")
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(out)")
        #expect(lines.first?.hasPrefix("pinproxy 0.") == true)
        #expect(lines.dropFirst().first?.hasPrefix("commit ") == true)
        // `openssl version`: "OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)".
        let cli = try ChildProcess.check("openssl", ["version"])
        let library = cli.range(of: "(Library: ").map { String(cli[$0.upperBound...].prefix { $0 != ")" }) }
            ?? cli.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(lines.last == library, "\(out) vs \(cli)")
    }
}
