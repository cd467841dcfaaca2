import Foundation
import NIOConcurrencyHelpers
@testable import PinproxyPolicy
import Testing

/// A policy file rewritten in place is empty or half written for a moment.
/// pinproxy must never serve that moment: an empty file is an error (so a
/// reload keeps the last good set), and the watcher reads a file for a
/// reload only once it has stopped changing.
struct PolicyRewriteTests {
    static let valid = """
        hosts:
          - {match: a.example.com, action: intercept}
          - {match: b.example.com, action: deny}

        """

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var policy: String
        var expected: String
        var testDescription: String { name }
    }

    static let none = "it needs `hosts:` with a list of host policies (write `hosts: []` for a file that has none on purpose)"

    static let emptyCases: [Case] = [
        Case(name: "zero bytes", policy: "", expected: "policies/p.yaml:1:1: error: policy file {file} is empty: \(none)"),
        Case(name: "blank lines", policy: "\n  \n\n", expected: "policies/p.yaml:1:1: error: policy file {file} is empty: \(none)"),
        Case(name: "comments only", policy: "# hosts:\n#   - match: a.example.com\n",
             expected: "policies/p.yaml:1:1: error: policy file {file} is empty: \(none)"),
        Case(name: "cut after `hosts:`", policy: "hosts:\n",
             expected: "policies/p.yaml:1:1: error: `hosts` has no value: list the host policies under it, or write `hosts: []` for a file that has none on purpose"),
        Case(name: "a mapping without `hosts`", policy: "{}\n",
             expected: "policies/p.yaml:1:1: error: a policy file needs `hosts:` with a list of host policies (write `hosts: []` for a file that has none on purpose)"),
    ]

    @Test(arguments: emptyCases)
    func anEmptyPolicyFileIsAnError(_ c: Case) throws {
        let tree = try ConfigTree(policies: ["p.yaml": c.policy])
        let result = tree.loader().load()
        let file = tree.root + "/policies/p.yaml"
        #expect(tree.rendered(result.errors) == [c.expected.replacingOccurrences(of: "{file}", with: file)
            .replacingOccurrences(of: tree.root + "/", with: "")])
        #expect(result.snapshot == nil)
    }

    @Test func hostsWrittenAsAnEmptyListIsAllowed() throws {
        let tree = try ConfigTree(policies: ["p.yaml": "# nothing here yet\nhosts: []\n"])
        let result = tree.loader().load()
        #expect(result.diagnostics.map(\.description) == [])
        #expect(result.snapshot?.policies.isEmpty == true)
    }

    @Test(arguments: ["", "\n", "# being rewritten\n", "hosts:\n"])
    func aReloadOfAnEmptiedFileKeepsTheLastGoodSet(_ emptied: String) throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let before = store.snapshot
        try tree.write("policies/p.yaml", emptied)
        let outcome = store.reload(trigger: .fileChange)
        #expect(outcome.metricLabel == "failure")
        #expect(store.snapshot === before)
        #expect(store.snapshot.policy(forHost: "a.example.com")?.action == .intercept)
        #expect(store.lastReload?.result == .failure)
        #expect(store.lastReload?.errors.first?.file == tree.root + "/policies/p.yaml")
    }

    /// The shape of the reported fail-open: the file truncated in place, left
    /// empty for longer than a poll, then written again. At no moment may the
    /// serving set lack the file's hosts. The watcher is stepped poll by poll.
    @Test func aFileTruncatedInPlaceIsNeverServedEmpty() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let served = NIOLockedValueBox<[(ReloadInfo.Result, Bool)]>([])
        store.addObserver { event in
            served.withLockedValue { $0.append((event.info.result, event.current.policy(forHost: "a.example.com") != nil)) }
        }
        let watcher = PolicyFileWatcher(store: store)
        var change = SettledChange(applied: watcher.fingerprint())

        let path = tree.root + "/policies/p.yaml"
        let fd = open(path, O_WRONLY | O_TRUNC)
        #expect(fd >= 0)
        // Left empty until the watcher has seen it settle and failed to load it.
        #expect(watcher.poll(&change) == .settling)
        #expect(watcher.poll(&change) == .reload)
        #expect(served.withLockedValue { $0.map(\.0) } == [.failure], "the settled empty file is a failed reload")
        #expect(watcher.poll(&change) == .unchanged, "a failed file is not retried until it changes")
        let rewritten = Self.valid + "  - {match: c.example.com, action: deny}\n"
        _ = rewritten.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)

        #expect(watcher.poll(&change) == .settling)
        #expect(watcher.poll(&change) == .reload)
        #expect(store.snapshot.policy(forHost: "c.example.com") != nil, "the rewritten file is live")
        let events = served.withLockedValue { $0 }
        #expect(events.map(\.0) == [.failure, .success])
        #expect(events.allSatisfy { $0.1 }, "a reload served a set without the file's hosts: \(events)")
    }

    /// A writer that keeps rewriting a file (a slow deploy, an editor saving
    /// in chunks) is not followed write by write: nothing is reloaded until
    /// the file has stopped changing, then the final content is. Each round
    /// writes between two polls, as a writer slower than the poll interval does.
    @Test func aFileStillBeingWrittenIsNotReloadedUntilItSettles() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let reloads = NIOLockedValueBox(0)
        store.addObserver { _ in reloads.withLockedValue { $0 += 1 } }
        let watcher = PolicyFileWatcher(store: store)
        var change = SettledChange(applied: watcher.fingerprint())

        let path = tree.root + "/policies/p.yaml"
        var last = ""
        for round in 1...20 {
            last = "w\(round).example.com"
            try (Self.valid + "  - {match: \(last), action: deny}\n").write(toFile: path, atomically: false, encoding: .utf8)
            #expect(watcher.poll(&change) == .settling, "round \(round)")
        }
        // Twenty polls have passed, each seeing the file still moving.
        #expect(reloads.withLockedValue { $0 } == 0, "reloaded while the file was still being written")

        #expect(watcher.poll(&change) == .reload)
        #expect(store.snapshot.policy(forHost: last) != nil, "the settled file (last host \(last)) is live")
        #expect(store.lastReload?.result == .success)
        #expect(reloads.withLockedValue { $0 } == 1)
    }
}
