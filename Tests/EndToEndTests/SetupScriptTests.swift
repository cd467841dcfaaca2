import Foundation
import PinproxyTestSupport
import Testing

/// The README's setup is one script, the same one `.ci/run` runs, and it
/// covers every command the tests spawn.
@Suite("Setup script", .blockingWaits)
struct SetupScriptTests {
    @Test func installDepsCoversWhatTheTestsSpawnAndCIAndTheREADMEUseIt() throws {
        let script = try Repository.text("scripts/install-deps")
        #expect(FileManager.default.isExecutableFile(atPath: Repository.path("scripts/install-deps")))

        // Every program a test spawns by name, found by reading the tests.
        var spawned = Set<String>()
        let tests = Repository.path("Tests")
        for case let file as String in FileManager.default.enumerator(atPath: tests) ?? .init() where file.hasSuffix(".swift") {
            let text = try String(contentsOfFile: tests + "/" + file, encoding: .utf8)
            let pattern = #"ChildProcess(\.(run|check|runSeparately))?\("([^"\\]+)""#
            let regex = try NSRegularExpression(pattern: pattern)
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let program = String(text[Range(match.range(at: 3), in: text)!])
                spawned.insert(URL(fileURLWithPath: program).lastPathComponent)
            }
        }
        #expect(spawned.isSuperset(of: ["openssl", "curl", "python3", "promtool"]), "\(spawned.sorted())")
        // Part of every Debian system (essential packages): nothing to install.
        let base: Set = ["sh", "bash", "env", "ldd", "dpkg"]
        for program in spawned.subtracting(base) {
            #expect(script.contains("command -v \(program)"), "scripts/install-deps does not check for \(program)")
        }
        // Python modules the tests and examples import.
        #expect(script.contains("import yaml") && script.contains("import requests"))

        // On this machine the tests run, so nothing may be missing.
        let (status, out, err) = try ChildProcess.runSeparately(Repository.path("scripts/install-deps"), ["--check"])
        #expect(status == 0, "\(out)\(err)")
        #expect(out.contains("ok       libssl-dev"))

        let ci = try Repository.text(".ci/run")
        let install = try #require(ci.range(of: "scripts/install-deps"))
        let test = try #require(ci.range(of: "swift test"))
        #expect(install.lowerBound < test.lowerBound)
        let readme = try Repository.text("README.md")
        let setup = try #require(readme.range(of: "## Setup"))
        #expect(readme[setup.upperBound...].prefix(600).contains("scripts/install-deps"))
        // The README names every package the script installs, not a part of them (issue 28 item 17).
        let section = readme[setup.upperBound...].prefix { _ in true }
        let setupText = String(section[..<(section.range(of: "\n## ")?.lowerBound ?? section.endIndex)])
        let packages = script.split(separator: "\n").filter { $0.hasPrefix("need_package ") }
            .compactMap { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.map(String.init) } + ["grpcio"]
        #expect(packages.count >= 15, "\(packages)")
        for package in packages {
            #expect(setupText.contains("`\(package)`"), "README's Setup does not name \(package)")
        }
    }
}
