import Foundation
import PinproxyTestSupport
import Testing

/// An `http://` accounts URL would send the client secret in clear: `check`
/// and `run` refuse it at the value, naming the key and the fix.
@Suite("spotify.accounts must be https", .blockingWaits)
struct PlainAccountsTests {
    @Test func checkAndRunRefuseAPlainAccountsURL() throws {
        let dir = try TemporaryDirectory("pinproxy-accounts")
        let secret = "do-not-print-\(UUID().uuidString.prefix(8))"
        try dir.write("etc/pinproxy.yaml", """
            \(ProxyHarness.baseMainConfig)
            spotify:
              accounts: http://127.0.0.1:9
              sessions:
                app: {client_id: abc, client_secret: \(secret)}
            """)
        try dir.write("etc/policies/test.yaml", "hosts: []\n")
        let config = dir.file("etc/pinproxy.yaml")
        let expected = "\(config):9:13: error: `spotify.accounts` must be an https:// URL: the token request sends the client secret, "
            + "which must not travel in clear; write `https://127.0.0.1:9`"

        let check = try PinproxyBinary.run(["check", "--config", config])
        #expect(check.status == 1)
        #expect(check.stdout.contains(expected), "\(check.stdout)")
        #expect(!(check.stdout + check.stderr).contains(secret))

        // A child of its own, stopped by its PID if it wrongly starts serving.
        let run = try ChildProcess(PinproxyBinary.path, ["run", "--config", config], directory: dir, name: "run")
        defer { run.stop() }
        #expect(run.waitForExit(timeout: 20) == 1, "run started with a plain accounts URL")
        #expect(run.outputText.contains(expected), "\(run.outputText)")
        #expect(!run.outputText.contains(secret))
        #expect(!FileManager.default.fileExists(atPath: dir.file("state/ca.pem")), "nothing was started")
    }
}
