import Foundation
import PinproxyTestSupport
import Testing

/// The client examples with an identity in the proxy URL
/// (`PINPROXY=http://NAME:PASSWORD@host:port`, docs/contract.md §15), against
/// a pinproxy with `require_identity: true`: admitted with it, 407 without.
@Suite("Client examples with an identity", .blockingWaits, .serialized)
struct AuthenticatedExamplesTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let upstream: TestUpstream
        let proxy: ProxyHarness
        static let password = "app pass/word"

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-examples-auth")
            let pki = try TestPKI.make(in: dir, names: ["api.example.test"])
            upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
            let (status, hash) = try ChildProcess.run(PinproxyBinary.path, ["passwd", "--iterations", "20000"], input: Self.password + "\n")
            guard status == 0 else { throw TestSupportError("pinproxy passwd: \(hash)") }
            proxy = try ProxyHarness(policies: """
                hosts:
                  - match: api.example.test
                    upstream: 127.0.0.1:\(upstream.port)
                    tls: { ca_file: \(pki.rootCertificate) }
                    probe_interval: 0
                    clients: [app]
                """, mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                clients:
                  require_identity: true
                  identities:
                    app:
                      password_hash: "\(hash.trimmingCharacters(in: .whitespacesAndNewlines))"
                """, directory: dir)
        }

        func run(_ executable: String, _ arguments: [String], user: String?) throws -> (status: Int32, out: String, err: String) {
            let escaped = Self.password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let url = user.map { "http://\($0):\(escaped)@127.0.0.1:\(proxy.port)" } ?? proxy.proxyURL
            let environment = Repository.cleanEnvironment(["PINPROXY": url, "PINPROXY_CA": proxy.caFile, "API_URL": "https://api.example.test/v1/me"])
            let result = try ChildProcess.runSeparately(executable, arguments, environment: environment, timeout: 120)
            return (result.status, result.stdout, result.stderr)
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    @Test func curlWithAndWithoutTheIdentity() async throws {
        let s = try await Self.setup.value
        let admitted = try s.run("/bin/bash", [Repository.path("examples/clients/curl.sh")], user: "app")
        #expect(admitted.out.contains("hello from upstream"), "\(admitted.err)")
        #expect(admitted.err.contains("HTTP 200"))
        let anonymous = try s.run("/bin/bash", [Repository.path("examples/clients/curl.sh")], user: nil)
        #expect(anonymous.err.contains("407"), "\(anonymous.err)")
        let line = s.proxy.waitForAccessLog(count: 2).first { ($0["status"] as? Int) == 200 }
        #expect(line?["identity"] as? String == "app")
    }

    @Test func pythonRequestsWithTheIdentity() async throws {
        try #require(Repository.hasPythonRequests, "Python's requests module is missing")
        let s = try await Self.setup.value
        let admitted = try s.run("python3", [Repository.path("examples/clients/python-requests.py")], user: "app")
        #expect(admitted.out.contains("hello from upstream"), "\(admitted.err)")
    }

    @Test(.enabled(if: Repository.which("node") != nil, "node is not installed"))
    func nodeWithTheIdentity() async throws {
        let s = try await Self.setup.value
        let admitted = try s.run("node", [Repository.path("examples/clients/node.js")], user: "app")
        #expect(admitted.out.contains("hello from upstream"), "\(admitted.err)")
        let anonymous = try s.run("node", [Repository.path("examples/clients/node.js")], user: nil)
        #expect(anonymous.err.contains("HTTP 407 (pinproxy: proxy_auth_required)"), "\(anonymous.err)")
    }

    @Test(.enabled(if: Repository.which("go") != nil, "go is not installed"))
    func goWithTheIdentity() async throws {
        let s = try await Self.setup.value
        let goDirectory = Repository.path("examples/clients/go")
        let escaped = Setup.password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let environment = Repository.cleanEnvironment([
            "PINPROXY": "http://app:\(escaped)@127.0.0.1:\(s.proxy.port)", "PINPROXY_CA": s.proxy.caFile,
            "API_URL": "https://api.example.test/v1/me",
        ])
        let result = try ChildProcess.runSeparately("go", ["run", "."], environment: environment, currentDirectory: goDirectory, timeout: 300)
        #expect(result.stdout.contains("hello from upstream"), "\(result.stderr)")
    }
}
