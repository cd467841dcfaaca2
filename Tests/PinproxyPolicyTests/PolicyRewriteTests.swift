import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy
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
    /// serving set lack the file's hosts.
    @Test func aFileTruncatedInPlaceIsNeverServedEmpty() async throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let served = NIOLockedValueBox<[(ReloadInfo.Result, Bool)]>([])
        store.addObserver { event in
            served.withLockedValue { $0.append((event.info.result, event.current.policy(forHost: "a.example.com") != nil)) }
        }
        let watcher = PolicyFileWatcher(store: store, interval: .milliseconds(100))
        let task = Task { try await watcher.run() }
        defer { task.cancel() }
        try await Task.sleep(for: .milliseconds(250))

        let path = tree.root + "/policies/p.yaml"
        let fd = open(path, O_WRONLY | O_TRUNC)
        #expect(fd >= 0)
        // Left empty until the watcher has seen it settle and failed to load
        // it (several polls; longer on a loaded machine).
        var reported = false
        for _ in 0..<100 where !reported {
            try await Task.sleep(for: .milliseconds(100))
            reported = served.withLockedValue { $0.contains { $0.0 == .failure } }
        }
        let rewritten = Self.valid + "  - {match: c.example.com, action: deny}\n"
        _ = rewritten.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)

        var live = false
        for _ in 0..<100 where !live {
            try await Task.sleep(for: .milliseconds(100))
            live = store.snapshot.policy(forHost: "c.example.com") != nil
        }
        #expect(live, "the rewritten file was not live within 10 s")
        let events = served.withLockedValue { $0 }
        #expect(events.allSatisfy { $0.1 }, "a reload served a set without the file's hosts: \(events)")
        #expect(reported, "the empty file was not reported as a failed reload within 10 s: \(events)")
    }

    /// A writer that keeps rewriting a file (a slow deploy, an editor saving
    /// in chunks) is not followed write by write: nothing is reloaded until
    /// the file has stopped changing, then the final content is.
    @Test func aFileStillBeingWrittenIsNotReloadedUntilItSettles() async throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let reloads = NIOLockedValueBox(0)
        store.addObserver { _ in reloads.withLockedValue { $0 += 1 } }
        let watcher = PolicyFileWatcher(store: store, interval: .milliseconds(400))
        let task = Task { try await watcher.run() }
        defer { task.cancel() }
        try await Task.sleep(for: .milliseconds(500))

        // Rewritten in place every 20 ms for 2 s, on a thread of its own so
        // the writes keep coming whatever the test pool is doing.
        let path = tree.root + "/policies/p.yaml"
        let lastHost = NIOLockedValueBox("")
        let writer = Thread {
            let deadline = Date().addingTimeInterval(2)
            var round = 0
            while Date() < deadline {
                round += 1
                let host = "w\(round).example.com"
                try? (Self.valid + "  - {match: \(host), action: deny}\n").write(toFile: path, atomically: false, encoding: .utf8)
                lastHost.withLockedValue { $0 = host }
                usleep(20_000)
            }
        }
        writer.start()
        try await Task.sleep(for: .milliseconds(1800))
        #expect(reloads.withLockedValue { $0 } == 0, "reloaded while the file was still being written")
        while writer.isExecuting { try await Task.sleep(for: .milliseconds(50)) }

        let last = lastHost.withLockedValue { $0 }
        var live = false
        for _ in 0..<100 where !live {
            try await Task.sleep(for: .milliseconds(100))
            live = store.snapshot.policy(forHost: last) != nil
        }
        #expect(live, "the settled file (last host \(last)) was not live within 10 s")
        #expect(store.lastReload?.result == .success)
    }
}
