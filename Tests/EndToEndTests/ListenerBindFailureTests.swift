import Foundation
import PinproxyTestSupport
import Testing

/// A listener that cannot bind stops the whole process with exit 1 and a line
/// that names it (docs/contract.md §14). Before, the failed service cancelled
/// the others but the proxy's listener ignored the cancellation: pinproxy
/// stayed up half-started, said nothing, and did not even stop on SIGTERM.
/// Found while chasing issue 28 item 20 with scripts/startup-loop.
@Suite("Listener bind failure", .blockingWaits)
struct ListenerBindFailureTests {
    static let policy = """
    hosts:
      - match: api.test
        upstream: 127.0.0.1:9
        probe_interval: 0
    """

    /// Starts `pinproxy run` and waits for it to exit by itself (it should,
    /// within moments); a process still running after 30 s is stopped and the
    /// test fails with its log.
    static func runToExit(mainConfig: String, in dir: TemporaryDirectory) throws -> (status: Int32?, log: String) {
        try dir.write("etc/pinproxy.yaml", mainConfig)
        try dir.write("etc/policies/test.yaml", policy)
        let process = try ChildProcess(PinproxyBinary.path, ["run", "--config", dir.file("etc/pinproxy.yaml")],
                                       directory: dir, name: "pinproxy", currentDirectory: dir.path)
        defer { process.stop() }
        let status = process.waitForExit(timeout: 30)
        return (status, process.outputText)
    }

    static func mainConfig(admin: String, extra: String = "") -> String {
        """
        listen: 127.0.0.1:0
        admin: { listen: \(admin) }
        ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
        policies: policies
        network: { allow: [127.0.0.0/8] }
        log: { format: json }
        \(extra)
        """
    }

    @Test func anAdminPortInUseStopsTheProcessNamingIt() throws {
        let dir = try TemporaryDirectory("pinproxy-bind-admin")
        let taken = try RefusingPort()
        let (status, log) = try Self.runToExit(mainConfig: Self.mainConfig(admin: "127.0.0.1:\(taken.port)"), in: dir)
        #expect(status == 1, "\(log)")
        #expect(log.contains("admin API cannot listen on 127.0.0.1:\(taken.port)"), "\(log)")
        #expect(log.contains("\"level\":\"critical\""), "\(log)")
    }

    @Test func aSwapPortInUseStopsTheProcessNamingIt() throws {
        let dir = try TemporaryDirectory("pinproxy-bind-swap")
        let taken = try RefusingPort()
        try dir.write("secret.txt", "secret\n")
        try dir.write("swap.key", Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() + "\n")
        let spotify = """
        spotify:
          accounts: https://accounts.spotify.test
          sessions:
            app: { flow: client_credentials, client_id: id, client_secret_file: ../secret.txt }
          swap: { listen: 127.0.0.1:\(taken.port), session: app, redirect_uri: "my-app://cb", key_file: ../swap.key }
        """
        let (status, log) = try Self.runToExit(mainConfig: Self.mainConfig(admin: "127.0.0.1:0", extra: spotify), in: dir)
        #expect(status == 1, "\(log)")
        #expect(log.contains("token swap cannot listen on 127.0.0.1:\(taken.port)"), "\(log)")
    }
}
