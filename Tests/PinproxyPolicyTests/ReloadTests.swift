import Foundation
import NIOConcurrencyHelpers
@testable import PinproxyPolicy
import Testing

/// docs/contract.md §3 "Reload": an invalid set never replaces a valid one; a watched
/// edit is live without a restart.
struct ReloadTests {
    static let valid = """
        hosts:
          - {match: a.example.com, action: tunnel}
        """

    @Test func invalidEditKeepsThePreviousSnapshot() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let before = store.snapshot
        let events = NIOLockedValueBox<[ReloadEvent]>([])
        store.addObserver { event in events.withLockedValue { $0.append(event) } }

        try tree.write("policies/p.yaml", """
            hosts:
              - {match: a.example.com, action: tunnel}
              - {match: b.example.com, action: sideways}
            """)
        let outcome = store.reload(trigger: .admin)
        guard case .failure(let errors) = outcome else {
            Issue.record("an invalid edit was accepted")
            return
        }
        #expect(tree.rendered(errors) == [
            "policies/p.yaml:3:36: error: `action` must be one of `intercept`, `tunnel`, `deny`, not `sideways`",
        ])
        #expect(store.snapshot === before)
        #expect(store.snapshot.policy(forHost: "b.example.com") == nil)
        #expect(store.lastReload?.result == .failure)
        #expect(store.lastReload?.errors.count == 1)
        #expect(outcome.metricLabel == "failure")
        let seen = events.withLockedValue { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.info.trigger == .admin)
        #expect(seen.first?.current === before)

        try tree.write("policies/p.yaml", Self.valid + "\n  - {match: b.example.com, action: deny}\n")
        #expect(store.reload().metricLabel == "success")
        #expect(store.snapshot !== before)
        #expect(store.snapshot.policy(forHost: "b.example.com")?.action == .deny)
        #expect(store.lastReload?.result == .success)
    }

    @Test func digestChangesOnlyWithThePolicy() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let first = try #require(store.snapshot.policy(forHost: "a.example.com")?.digest)
        try tree.write("policies/p.yaml", "# a comment\n" + Self.valid)
        store.reload()
        #expect(store.snapshot.policy(forHost: "a.example.com")?.digest == first)
        try tree.write("policies/p.yaml", Self.valid.replacingOccurrences(of: "tunnel", with: "deny"))
        store.reload()
        let changed = try #require(store.snapshot.policy(forHost: "a.example.com")?.digest)
        #expect(changed != first)
        #expect(changed.count == 64)
    }

    /// Stepped poll by poll (`run` polls every `interval`): two polls that see
    /// the same new content reload it, whatever the machine's load.
    @Test func watcherPicksUpAValidEdit() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.valid])
        let store = try PolicyStore.load(tree.loader()).get()
        let watcher = PolicyFileWatcher(store: store)
        var change = SettledChange(applied: watcher.fingerprint())
        #expect(watcher.poll(&change) == .unchanged)

        try tree.write("policies/p.yaml", Self.valid + "\n  - {match: b.example.com, action: deny}\n")
        #expect(watcher.poll(&change) == .settling)
        #expect(store.snapshot.policy(forHost: "b.example.com") == nil, "not before the edit has settled")
        #expect(watcher.poll(&change) == .reload)
        #expect(store.snapshot.policy(forHost: "b.example.com") != nil)
        #expect(store.lastReload?.trigger == .fileChange)
        #expect(watcher.poll(&change) == .unchanged)

        // A new file in the policies directory is watched too.
        try tree.write("policies/q.yml", "hosts: [{match: c.example.com, action: deny}]\n")
        #expect(watcher.poll(&change) == .settling)
        #expect(watcher.poll(&change) == .reload)
        #expect(store.snapshot.policy(forHost: "c.example.com") != nil)
    }
}
