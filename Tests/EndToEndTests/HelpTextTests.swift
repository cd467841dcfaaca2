import Foundation
import PinproxyTestSupport
import Testing

/// What a new user reads first (issue 28 item 17): `--help` wrapped once,
/// defaults said once, exit statuses as they are, the contract's command
/// table complete, and `spotify login` on the shipped config saying what to do.
@Suite("Help texts and the command table", .blockingWaits)
struct HelpTextTests {
    /// A paragraph wrapped by hand and again by the parser leaves a short line
    /// whose next word would have fitted on it.
    @Test(arguments: [["explain"], ["pin"], ["passwd"], ["pins", "suggest"]])
    func discussionsAreWrappedOnce(_ command: [String]) throws {
        let help = try PinproxyBinary.run(command + ["--help"])
        #expect(help.status == 0)
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let overview = lines.prefix { !$0.hasPrefix("USAGE:") }
        // The parser's own width: the longest line it wrapped.
        let width = overview.map(\.count).max() ?? 80
        for (line, next) in zip(overview, overview.dropFirst()) {
            let word = next.split(separator: " ").first.map(String.init) ?? ""
            guard !line.isEmpty, !word.isEmpty, !word.hasPrefix("--") else { continue }
            #expect(line.count + 1 + word.count > width, "`\(word)` would fit on the line before it:\n\(line)\n\(next)")
        }
    }

    @Test func passwdSaysItsDefaultOnce() throws {
        let help = try PinproxyBinary.run(["passwd", "--help"])
        #expect(help.stdout.components(separatedBy: "150000").count - 1 == 1, "\(help.stdout)")
    }

    @Test func explainsExitStatusIsTheOneItReturns() throws {
        let help = try PinproxyBinary.run(["explain", "--help"]).stdout.replacingOccurrences(of: "\n", with: " ")
            .split(separator: " ").joined(separator: " ")
        #expect(help.contains("1 it would be refused"), "\(help)")
        // Without --connect, a denied host exits 1 as the help says.
        let dir = try TemporaryDirectory("pinproxy-help")
        try dir.write("etc/pinproxy.yaml", "policies: policies\n")
        try dir.write("etc/policies/p.yaml", "hosts:\n  - {match: blocked.test, action: deny}\n")
        #expect(try PinproxyBinary.run(["explain", "blocked.test", "--config", dir.file("etc/pinproxy.yaml")]).status == 1)
    }

    /// Every command and option the README shows is in the contract's §2 table.
    @Test func theContractsCommandTableIsComplete() throws {
        let contract = try Repository.text("docs/contract.md")
        let start = try #require(contract.range(of: "## 2. Command line"))
        let end = try #require(contract.range(of: "## 3. Configuration"))
        let table = contract[start.upperBound..<end.lowerBound]
        for entry in ["`pinproxy run", "`pinproxy check", "--strict", "--horizon", "`pinproxy explain", "`pinproxy pin ",
                      "`pinproxy pins suggest", "`pinproxy passwd", "`pinproxy ca ", "`pinproxy spotify login",
                      "`pinproxy credentials login"] {
            #expect(table.contains(entry), "§2 lacks \(entry)")
        }
    }

    /// The README's `spotify login user` on the shipped config: one sentence
    /// that says what is missing and where to add it, not an empty list.
    @Test func spotifyLoginOnTheShippedConfigSaysWhatToAdd() throws {
        let login = try PinproxyBinary.run(["spotify", "login", "user", "--config", Repository.path("etc/pinproxy.yaml")],
                                           currentDirectory: Repository.root)
        #expect(login.status == 1)
        #expect(!login.stderr.contains("known: )"), "\(login.stderr)")
        #expect(login.stderr.contains("defines no spotify.sessions; add one with flow: refresh_token"), "\(login.stderr)")
    }
}
