import Foundation
import PinproxyTestSupport
import Testing

/// Details of the shipped examples that a reader trusts without checking
/// (issue 28 item 16): the keys their comments name, and the Dockerfile's
/// dependency layer.
@Suite("Example details", .blockingWaits)
struct ExampleDetailsTests {
    /// Every `section.key` of the main file that the shipped examples name in
    /// their comments is a key pinproxy knows (issue 28 item 16: the unit named
    /// `limits.max_connections`).
    @Test func theKeysTheExamplesNameExist() throws {
        let files = ["examples/systemd/pinproxy.service", "Dockerfile", "examples/kubernetes/deployment.yaml",
                     "examples/kubernetes/configmap.yaml", "examples/container/pinproxy.yaml"]
        let regex = try NSRegularExpression(pattern: #"\b(limits|admin|network|clients)\.([a-z_]+)\b"#)
        var named: Set<[String]> = []
        for file in files {
            let text = try Repository.text(file)
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                named.insert([1, 2].map { String(text[Range(match.range(at: $0), in: text)!]) })
            }
        }
        #expect(named.contains(["limits", "max_client_connections"]))
        let dir = try TemporaryDirectory("pinproxy-example-keys")
        for key in named.sorted(by: { $0.joined() < $1.joined() }) {
            try dir.write("etc/pinproxy.yaml", "policies: policies\n\(key[0]):\n  \(key[1]): 1\n")
            try dir.write("etc/policies/p.yaml", "hosts: []\n")
            let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")], currentDirectory: dir.path)
            #expect(!(check.stdout + check.stderr).contains("unknown key"), "\(key.joined(separator: ".")): \(check.stdout)\(check.stderr)")
        }
    }

    /// A RUN that writes under a directory a later RUN mounts a cache on is
    /// hidden by that mount: the package resolution must go into the same cache
    /// as the build that uses it (issue 28 item 16). The build is
    /// `scripts/build-release`, whose builds each start from a scratch
    /// directory of their own: the cache they share is SwiftPM's.
    @Test func theResolvedPackagesAreWhereTheBuildLooks() throws {
        let runs = try Dockerfile.load().runs
        func cacheTargets(_ run: String) -> [String] {
            run.split(separator: " ").filter { $0.hasPrefix("--mount=type=cache") }.compactMap {
                $0.split(separator: ",").first { $0.hasPrefix("target=") }.map { String($0.dropFirst("target=".count)) }
            }
        }
        let resolve = try #require(runs.first { $0.contains("swift package resolve") })
        let build = try #require(runs.first { $0.contains("scripts/build-release") })
        #expect(!cacheTargets(build).isEmpty, "the build keeps its cache")
        #expect(cacheTargets(resolve) == cacheTargets(build), "resolve: \(resolve)\nbuild: \(build)")
    }
}
