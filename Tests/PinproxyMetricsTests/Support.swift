import Foundation
import Testing
import PinproxyPolicy
import PinproxyTestSupport

/// A config tree in a temp dir: `pinproxy.yaml` and `policies/*.yaml`,
/// loaded with a fixed clock.
final class MetricsFixture {
    /// "Today": 2026-11-22T12:00:00Z.
    static let now = DateText.parse("2026-11-22T12:00:00Z", bound: .start)!

    static let main = """
        policies: policies
        default_action: tunnel
        spotify:
          sessions:
            app:
              flow: client_credentials
              client_id: abc
              client_secret: ${SPOTIFY_SECRET}
        """

    static let policies = """
        hosts:
          - match: api.example.com
            action: intercept
            pins:
              spki_sha256:
                - pin: "\(pin(1))"
                  not_after: 2027-03-01
                - pin: "\(pin(2))"
                  not_after: 2027-06-01
            auth: {spotify: app}
          - match: "*.cdn.example.com"
            action: tunnel
          - match: blocked.example.com
            action: deny
        """

    let directory: TemporaryDirectory

    init(main: String = MetricsFixture.main, policies: String = MetricsFixture.policies) throws {
        directory = try TemporaryDirectory("pinproxy-metrics")
        try directory.write("pinproxy.yaml", main)
        try directory.write("policies/p.yaml", policies)
    }

    func write(policies: String) throws {
        try directory.write("policies/p.yaml", policies)
    }

    func store() throws -> PolicyStore {
        let loader = PolicyLoader(
            configFile: directory.file("pinproxy.yaml"), environment: ["SPOTIFY_SECRET": "s3cret"],
            workingDirectory: directory.path, clock: { MetricsFixture.now })
        return try PolicyStore.load(loader).get()
    }

    /// 32 bytes of base64 that differ per seed.
    static func pin(_ seed: UInt8) -> String {
        Data(repeating: seed, count: 32).base64EncodedString()
    }
}

/// `promtool`, when installed (`.ci/run` installs Debian's `prometheus`).
enum Promtool {
    static let path: String? = ["/usr/bin/promtool", "/usr/local/bin/promtool", "/bin/promtool"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    static var missingMessage: Comment { "promtool is not installed (apt-get install prometheus); skipping" }

    /// The repository root, from this file's path.
    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()
}
