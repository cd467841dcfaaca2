import Foundation
import PinproxyTestSupport
import Testing

/// `pinproxy explain` and `pinproxy pins suggest` (docs/contract.md §13), run as
/// the built binary against real files, a real `openssl s_server` and a running proxy.
@Suite("explain and pins suggest", .blockingWaits)
struct OperatorToolsTests {
    struct Setup {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let upstream: OpenSSLServer
        let intermediate: String
        let root: String
        let config: String
    }

    /// A config with an exact, a wildcard and a deny policy; `api.test`'s pins are `pins`.
    static func setup(pins: (TestPKI) throws -> String) throws -> Setup {
        let dir = try TemporaryDirectory("pinproxy-explain")
        let pki = try TestPKI.make(in: dir, names: ["api.test"])
        let upstream = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        // The upstream is on loopback: the proxy (and so `explain --connect`) dials it only when network.allow lists it.
        try dir.write("etc/pinproxy.yaml", "policies: policies\nca:\n  cert: ../state/ca.pem\n  key: ../state/ca-key.pem\n"
            + "network:\n  allow: [127.0.0.0/8]\n")
        try dir.write("etc/policies/p.yaml", """
            hosts:
              - match: api.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                pins:
                  spki_sha256:
            \(try pins(pki))
              - match: "*.cdn.test"
                action: tunnel
                ports: [443, 8443]
              - match: blocked.test
                action: deny
            """)
        return Setup(dir: dir, pki: pki, upstream: upstream, intermediate: try TestPKI.opensslSPKIPin(pki.intermediateCertificate),
                     root: try TestPKI.opensslSPKIPin(pki.rootCertificate), config: dir.file("etc/pinproxy.yaml"))
    }

    static func twoPins(_ pki: TestPKI) throws -> String {
        """
                    - { pin: "\(try TestPKI.opensslSPKIPin(pki.intermediateCertificate))", note: intermediate }
                    - { pin: "\(try TestPKI.opensslSPKIPin(pki.rootCertificate))", not_after: 2099-01-01T00:00:00Z, note: root }
        """
    }

    @Test func explainsAnExactAWildcardAndAnUnmatchedHost() throws {
        let s = try Self.setup(pins: Self.twoPins)
        defer { s.upstream.stop() }
        let exact = try PinproxyBinary.run(["explain", "api.test", "--config", s.config])
        #expect(exact.status == 0, "\(exact.stderr)")
        #expect(Self.line(exact.stdout, startingWith: "  api.test ")?.hasSuffix("<- matches") == true, "\(exact.stdout)")
        #expect(Self.line(exact.stdout, startingWith: "  *.test ")?.hasSuffix("no policy") == true)
        #expect(exact.stdout.contains("action:   intercept"))
        #expect(exact.stdout.contains("active    spki_sha256 \(s.intermediate)"))
        #expect(exact.stdout.contains("answer:   intercepted: policy api.test"))

        let wildcard = try PinproxyBinary.run(["explain", "img.cdn.test:8443", "--config", s.config])
        #expect(wildcard.status == 0)
        #expect(wildcard.stdout.contains("explain img.cdn.test:8443"))
        #expect(Self.line(wildcard.stdout, startingWith: "  img.cdn.test ")?.hasSuffix("no policy") == true, "\(wildcard.stdout)")
        #expect(Self.line(wildcard.stdout, startingWith: "  *.cdn.test ")?.contains("policy *.cdn.test (") == true)
        #expect(wildcard.stdout.contains("ports:    443, 8443 (ports:)"), "\(wildcard.stdout)")
        #expect(wildcard.stdout.contains("answer:   tunnelled: policy *.cdn.test"))
        #expect(exact.stdout.contains("ports:    443 for CONNECT, 80, 443 for http:// requests"), "\(exact.stdout)")
        // A port outside the defaults: refused, and explain says an http:// request could reach port 80.
        let port80 = try PinproxyBinary.run(["explain", "api.test:80", "--config", s.config])
        #expect(port80.status == 1, "a refusal exits 1")
        #expect(port80.stdout.contains("answer:   403 port_denied: policy api.test ("), "\(port80.stdout)")
        #expect(port80.stdout.contains("an absolute-form http://api.test:80/ request is allowed"), "\(port80.stdout)")

        let unmatched = try PinproxyBinary.run(["explain", "nowhere.test", "--config", s.config])
        #expect(unmatched.status == 1, "a refusal exits 1")
        #expect(unmatched.stdout.contains("answer:   403 host_denied: no policy matches nowhere.test and default_action is deny"), "\(unmatched.stdout)")
    }

    @Test func explainAnswersForAClient() throws {
        let dir = try TemporaryDirectory("pinproxy-explain-client")
        let (status, hash, stderr) = try ChildProcess.runSeparately(PinproxyBinary.path, ["passwd", "--iterations", "20000"], input: "s3cret\n")
        #expect(status == 0, "\(stderr)")
        try dir.write("etc/pinproxy.yaml", """
            policies: policies
            ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
            clients:
              allow: [127.0.0.0/8, 10.0.0.0/8]
              identities:
                billing: { password_hash: "\(hash.trimmingCharacters(in: .whitespacesAndNewlines))" }
                reports: { password_hash: "\(hash.trimmingCharacters(in: .whitespacesAndNewlines))" }
            """)
        try dir.write("etc/policies/p.yaml", """
            hosts:
              - match: api.test
                action: tunnel
                clients: [billing, 10.2.3.0/24]
            """)
        let config = dir.file("etc/pinproxy.yaml")
        let billing = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "billing"])
        #expect(billing.status == 0, "\(billing.stdout)\(billing.stderr)")
        #expect(billing.stdout.contains("client:   billing may use this policy"), "\(billing.stdout)")
        let reports = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "reports"])
        #expect(reports.status == 1)
        #expect(reports.stdout.contains("client:   403 client_denied:"), "\(reports.stdout)")
        let network = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "10.2.3.4"])
        #expect(network.status == 0, "\(network.stdout)")
        let anonymous = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "10.9.9.9"])
        #expect(anonymous.status == 1)
        #expect(anonymous.stdout.contains("client:   407 proxy_auth_required:"), "\(anonymous.stdout)")
        let unknown = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "nobody"])
        #expect(unknown.status != 0 && unknown.stderr.contains("--client must name an identity"), "\(unknown.stderr)")
    }

    static func line(_ text: String, startingWith prefix: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init)
    }

    @Test func afterAPinExpiresExplainShowsItInactiveAndWarns() throws {
        let s = try Self.setup(pins: Self.twoPins)
        defer { s.upstream.stop() }
        let later = try PinproxyBinary.run(["explain", "api.test", "--config", s.config, "--at", "2099-06-01"])
        #expect(later.status == 0)
        #expect(later.stdout.contains("inactive  spki_sha256 \(s.root)  expired 2099-01-01T00:00:00Z"), "\(later.stdout)")
        #expect(later.stdout.contains("1 active at 2099-06-01T00:00:00Z"))
        #expect(later.stdout.contains("timeline: warning: fewer than two active pins"))
    }

    @Test func explainConnectHandshakesAndJudgesTheChain() throws {
        let good = try Self.setup(pins: Self.twoPins)
        defer { good.upstream.stop() }
        let served = try PinproxyBinary.run(["explain", "api.test", "--config", good.config, "--connect"])
        #expect(served.status == 0, "\(served.stdout)\(served.stderr)")
        #expect(served.stdout.contains("verdict:  match: pin sha256/\(good.intermediate) is in the chain"), "\(served.stdout)")
        #expect(served.stdout.contains("  sha256/\(try TestPKI.opensslSPKIPin(good.pki.leafCertificate))"), "the leaf of the chain seen")

        let wrong = try Self.setup { _ in
            """
                        - { pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" }
                        - { pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=" }
            """
        }
        defer { wrong.upstream.stop() }
        let refused = try PinproxyBinary.run(["explain", "api.test", "--config", wrong.config, "--connect"])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("verdict:  mismatch_enforced: a request would get 502 pin_mismatch"), "\(refused.stdout)")
        #expect(refused.stdout.contains("  sha256/\(wrong.intermediate)"), "the chain it saw")
    }

    @Test func pinsSuggestAfterReportModeTrafficPrintsPinsThatCheckAccepts() throws {
        let dir = try TemporaryDirectory("pinproxy-suggest")
        let pki = try TestPKI.make(in: dir, names: ["new.test"])
        let upstream = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { upstream.stop() }
        let head = """
            hosts:
              - match: new.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0s

            """
        let proxy = try ProxyHarness(policies: head + """
                pins:
                  mode: report
                  spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}]
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        let none = try PinproxyBinary.run(["pins", "suggest", "--admin", admin, "--host", "new.test"])
        #expect(none.status == 2, "nothing seen yet (no probe, no traffic): \(none.stdout)")
        let served = try Curl.run("https://new.test/", proxy: proxy, directory: dir)
        #expect(served.status == 200, "report mode lets it through: \(served.stderr)")

        let suggest = try PinproxyBinary.run(["pins", "suggest", "--admin", admin, "--host", "new.test"])
        #expect(suggest.status == 0, "\(suggest.stderr)")
        let yaml = suggest.stdout
        let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
        let root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
        #expect(yaml.contains("        - pin: \"\(intermediate)\""), "\(yaml)")
        #expect(yaml.contains("  - pin: \"\(root)\""))
        #expect(!yaml.contains(try TestPKI.opensslSPKIPin(pki.leafCertificate)), "not the short-lived leaf")
        #expect(yaml.contains("# an intermediate and the root above it"))

        // Pasted as printed (indented for it) under `pins:` in place of the report-mode list,
        // `check` accepts it (and enforces it).
        let pasted = yaml
        #expect(yaml.split(separator: "\n").allSatisfy { $0.hasPrefix("      ") }, "indented to paste under a policy's pins:")
        try dir.write("etc/policies/test.yaml", head + "    pins:\n" + pasted)
        let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")], currentDirectory: dir.path)
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)\n\(pasted)")
        let explain = try PinproxyBinary.run(["explain", "new.test", "--config", dir.file("etc/pinproxy.yaml"), "--connect"],
                                             currentDirectory: dir.path)
        #expect(explain.stdout.contains("verdict:  match: pin sha256/\(intermediate)"), "\(explain.stdout)")
    }

    /// After an enforced mismatch, `pins suggest` stays with the chain that
    /// matched, says another was refused, finds the admin API from `--config`,
    /// and a down admin API is one sentence (issue 28 item 10).
    @Test func pinsSuggestAfterAnEnforcedMismatchKeepsToTheChainThatMatched() async throws {
        let dir = try TemporaryDirectory("pinproxy-suggest-refused")
        let pki = try TestPKI.make(in: dir, names: ["new.test"])
        let other = try TemporaryDirectory("pinproxy-suggest-interceptor")
        let interceptor = try TestPKI.make(in: other, names: ["new.test"])
        // Both roots trusted, so the interceptor's chain verifies and only the pins refuse it.
        let bundle = dir.file("roots.pem")
        try (String(contentsOfFile: pki.rootCertificate, encoding: .utf8) + String(contentsOfFile: interceptor.rootCertificate, encoding: .utf8))
            .write(toFile: bundle, atomically: true, encoding: .utf8)
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
        let root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: new.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(bundle) }
                probe_interval: 0s
                pins:
                  spki_sha256: [{pin: "\(intermediate)"}, {pin: "\(root)"}]
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        #expect(try Curl.run("https://new.test/", proxy: proxy, directory: dir).status == 200)
        try upstream.swapCertificate(chainFile: interceptor.chainFile, keyFile: interceptor.leafKey)
        #expect(try Curl.run("https://new.test/", proxy: proxy, directory: dir).pinproxyError == "pin_mismatch")

        // No --admin: the config's admin.listen (port 0 here, so point the config at the bound port).
        let admin = try proxy.adminPort
        try dir.write("etc/suggest.yaml", "admin:\n  listen: 127.0.0.1:\(admin)\n")
        let suggest = try PinproxyBinary.run(["pins", "suggest", "--config", dir.file("etc/suggest.yaml"), "--host", "new.test"])
        #expect(suggest.status == 0, "\(suggest.stderr)")
        #expect(suggest.stdout.contains("        - pin: \"\(intermediate)\""), "\(suggest.stdout)")
        #expect(!suggest.stdout.contains(try TestPKI.opensslSPKIPin(interceptor.intermediateCertificate)), "not the refused chain")
        #expect(!suggest.stdout.contains("WARNING"))
        #expect(suggest.stdout.contains("1 other matched no pin"), "\(suggest.stdout)")
        let policies = try Curl.run("http://127.0.0.1:\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir).body
        #expect(policies.contains("\"verdict\":\"mismatch_enforced\"") && policies.contains("\"verdict\":\"match\""), "\(policies)")

        let down = try PinproxyBinary.run(["pins", "suggest", "--admin", "http://127.0.0.1:1"])
        #expect(down.status == 1)
        let lines = down.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one sentence: \(down.stderr)")
        #expect(down.stderr.contains("cannot read http://127.0.0.1:1/policies: nothing answers there (connection refused); is pinproxy running"),
                "\(down.stderr)")
        #expect(!down.stderr.contains("Domain="), "no NSError dump")

        let https = try PinproxyBinary.run(["pins", "suggest", "--admin", "https://127.0.0.1:1"])
        #expect(https.status != 0)
        #expect(https.stderr.contains("--admin must be the admin API's http:// URL"), "\(https.stderr)")
    }

    /// The container image runs the binary, with the Swift runtime linked
    /// in (`--static-swift-stdlib`), on `debian:bookworm-slim` plus the
    /// packages its runtime stage installs: every library the binary links
    /// from outside the Swift toolchain must come from those. (`pins suggest`
    /// once imported `FoundationNetworking`, which needs libcurl and some
    /// twenty libraries behind it that the image does not have.)
    @Test func everyLibraryTheBinaryLinksIsInTheContainerImage() throws {
        let dockerfile = try Repository.text("Dockerfile")
        let runtimeStage = try #require(dockerfile.range(of: "\nFROM ", options: .backwards)).upperBound
        let install = try #require(dockerfile[runtimeStage...].range(of: #"apt-get install [^\\&\n]*"#, options: .regularExpression))
        let installed = Set(dockerfile[install].split(separator: " ").dropFirst(2).filter { !$0.hasPrefix("-") }.map(String.init))
        #expect(installed.contains("libssl3"), "the runtime stage's packages: \(installed.sorted())")
        // In debian:bookworm-slim already (apt itself needs them).
        let slim: Set = ["libc6", "libstdc++6", "libgcc-s1"]

        let ldd = try ChildProcess.runSeparately("/usr/bin/ldd", [PinproxyBinary.path])
        #expect(ldd.status == 0, "\(ldd.stderr)")
        let linked = ldd.stdout.split(separator: "\n").compactMap { line -> String? in
            guard let arrow = line.range(of: "=> /") else { return nil }
            return String(line[arrow.upperBound...].split(separator: " ").first.map { "/" + $0 } ?? "")
        }
        #expect(linked.contains { $0.hasSuffix("/libssl.so.3") }, "ldd lists the libraries: \(ldd.stdout)")
        for library in linked where !library.contains("/lib/swift/") {
            // With /lib a link to /usr/lib, a package may have registered the file under either.
            let names = library.hasPrefix("/usr/lib/") ? [library, String(library.dropFirst(4))] : [library, "/usr" + library]
            var package = "no package"
            for name in names {
                let owner = try ChildProcess.runSeparately("/usr/bin/dpkg", ["-S", name])
                if owner.status == 0, let found = owner.stdout.split(separator: ":").first {
                    package = String(found)
                    break
                }
            }
            #expect(installed.union(slim).contains(package), "\(library) comes from \(package), which the image does not install")
        }
    }
}
