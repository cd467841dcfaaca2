import Foundation
import PinproxyPolicy
import PinproxyTLS
import Testing

/// `etc/` as shipped passes `check` today with no errors and no warnings,
/// on a machine with no environment variables set.
struct ShippedConfigTests {
    static let repository = SchemaTests.repository

    /// Every top-level key of the main file is shown in `etc/pinproxy.yaml` and
    /// has a row in docs/policies.md (issue 28 item 17: `http2` had neither).
    @Test func everyMainKeyIsInTheShippedFileAndThePolicyGuide() throws {
        let shipped = try String(contentsOfFile: Self.repository + "/etc/pinproxy.yaml", encoding: .utf8)
        let guide = try String(contentsOfFile: Self.repository + "/docs/policies.md", encoding: .utf8)
        let topLevel = try #require(ConfigKeys.main[""])
        for key in topLevel {
            let lines = shipped.split(separator: "\n")
            #expect(lines.contains { $0.hasPrefix("\(key):") || $0.hasPrefix("# \(key):") }, "etc/pinproxy.yaml does not show `\(key)`")
            #expect(guide.contains("| `\(key)` |") || guide.contains("| `\(key).") || guide.contains("`\(key).") , "docs/policies.md has no row for `\(key)`")
        }
        #expect(guide.contains("| `http2` |"))
    }

    @Test func checkPassesWithNoWarnings() throws {
        let loader = PolicyLoader(configFile: "etc/pinproxy.yaml", environment: [:], workingDirectory: Self.repository)
        let result = loader.load()
        #expect(result.diagnostics.map(\.description) == [])
        let report = CheckReport(diagnostics: result.diagnostics, strict: true)
        #expect(report.exitCode == 0)
        #expect(report.json == "{\"valid\": true, \"errors\": [], \"warnings\": []}\n")

        let snapshot = try #require(result.snapshot)
        #expect(snapshot.config.policiesPath == Self.repository + "/etc/policies")
        #expect(snapshot.config.ca.certificatePath == Self.repository + "/state/ca.pem")
        #expect(snapshot.config.listen.description == "127.0.0.1:8080")
        for host in ["api.spotify.com", "ACCOUNTS.spotify.com."] {
            let policy = try #require(snapshot.policy(forHost: host))
            #expect(policy.action == .intercept)
            #expect(policy.pins?.activePins(at: Date()).count == 3)
        }
        #expect(snapshot.policy(forHost: "spotify.com") == nil)
    }

    /// The pins are those of the named system roots.
    @Test(arguments: ["DigiCert_Global_Root_CA", "DigiCert_Global_Root_G2", "DigiCert_Global_Root_G3"])
    func pinsAreTheSystemRoots(name: String) throws {
        let certificate = try #require(try Certificate.loadPEM(file: "/etc/ssl/certs/\(name).pem").first)
        let loader = PolicyLoader(configFile: "etc/pinproxy.yaml", environment: [:], workingDirectory: Self.repository)
        let policy = try #require(loader.load().snapshot?.policy(forHost: "api.spotify.com"))
        let pin = try #require(policy.pins?.pins.first { $0.hash == certificate.spkiSHA256 })
        #expect(pin.notAfter == certificate.notAfter)
        #expect(pin.note?.contains(name.replacingOccurrences(of: "_", with: " ")) == true)
    }

    @Test func embeddedDefaultsResolveAgainstTheWorkingDirectory() throws {
        let tree = try ConfigTree()
        try FileManager.default.removeItem(atPath: tree.root + "/pinproxy.yaml")
        // With no config file, a missing etc/policies means no policies (every host
        // gets default_action deny), said as a warning; a configured path must exist.
        let missing = PolicyLoader(environment: [:], workingDirectory: tree.root).load()
        #expect(missing.errors.isEmpty)
        #expect(missing.snapshot?.policies.isEmpty == true)
        #expect(missing.warnings.map(\.description) == [
            "<embedded defaults>:0:0: warning: no policies: \(tree.root)/etc/policies does not exist, so every host gets default_action deny",
        ])
        try FileManager.default.createDirectory(atPath: tree.root + "/etc/policies", withIntermediateDirectories: true)
        let loaded = PolicyLoader(environment: [:], workingDirectory: tree.root).load()
        let snapshot = try #require(loaded.snapshot)
        #expect(snapshot.config.file == nil)
        #expect(snapshot.config.ca.keyPath == tree.root + "/state/ca-key.pem")
        #expect(snapshot.config.admin.listen.description == "127.0.0.1:9090")
    }
}
