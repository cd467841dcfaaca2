import Foundation
import PinproxyTestSupport
import Testing

/// The committed completions and man pages (scripts/generate-completions,
/// docs/contract.md §13) are what the command line's definitions produce now:
/// a new option or subcommand without regenerating them fails here.
@Suite("Generated completions and man pages", .blockingWaits)
struct GeneratedDocsTests {
    @Test(arguments: ["bash", "zsh", "fish"])
    func theCommittedCompletionScriptIsCurrent(shell: String) throws {
        let generated = try PinproxyBinary.run(["--generate-completion-script", shell])
        #expect(generated.status == 0, "\(generated.stderr)")
        let committed = try Repository.text("examples/completions/pinproxy.\(shell)")
        #expect(generated.stdout == committed, "examples/completions/pinproxy.\(shell) is stale: run scripts/generate-completions")
    }

    /// The `generate-manual` tool the plugin builds (scripts/generate-completions builds it).
    static let manualTool: String? = {
        let enumerator = FileManager.default.enumerator(atPath: Repository.path(".build"))
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix("debug/generate-manual-tool") || path.hasSuffix("release/generate-manual-tool") {
                let full = Repository.path(".build/" + path)
                if FileManager.default.isExecutableFile(atPath: full) { return full }
            }
            if path.hasPrefix("checkouts") || path.hasPrefix("repositories") || path.contains(".build/") { enumerator?.skipDescendants() }
        }
        return nil
    }()

    @Test(.enabled(if: manualTool != nil, "generate-manual-tool is not built (scripts/generate-completions builds it); skipping"))
    func theCommittedManPagesAreCurrent() throws {
        let script = try Repository.text("scripts/generate-completions")
        let date = try #require(script.split(separator: "\n").first { $0.hasPrefix("MAN_DATE=") }?.dropFirst("MAN_DATE=".count))
        let dir = try TemporaryDirectory("pinproxy-man")
        let (status, output) = try ChildProcess.run(Self.manualTool!, [
            PinproxyBinary.path, "--multi-page", "--date", String(date), "--output-directory", dir.path,
        ])
        #expect(status == 0, "\(output)")
        let generated = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".1") }.sorted()
        let committed = try FileManager.default.contentsOfDirectory(atPath: Repository.path("docs/man")).sorted()
        #expect(generated == committed, "docs/man is stale: run scripts/generate-completions")
        #expect(generated.contains("pinproxy.explain.1") && generated.contains("pinproxy.pins.suggest.1"))
        for page in generated where committed.contains(page) {
            let fresh = try String(contentsOfFile: dir.file(page), encoding: .utf8)
            #expect(fresh == (try Repository.text("docs/man/" + page)), "docs/man/\(page) is stale: run scripts/generate-completions")
        }
    }
}
