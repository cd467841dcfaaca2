import Foundation
import PinproxyPolicy
import Testing

/// `check` walks the horizon and names the first no-backup and outage moments.
struct PinTimelineTests {
    static let policy = """
        hosts:
          - match: a.example.com
            upgrade_to_tls: true
            pins:
              spki_sha256:
                - pin: "\(Fixture.pin(1))"
                  not_after: 2026-12-02
                  note: backup
                - pin: "\(Fixture.pin(2))"
                  not_after: 2026-12-12
                  note: current
        """

    @Test func warnsAtTheBackupsExpiryAndAtTheOutage() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.policy])
        let result = tree.loader().load()
        #expect(result.snapshot != nil)
        let backup = Fixture.pin(1).prefix(12)
        let current = Fixture.pin(2).prefix(12)
        #expect(tree.rendered(result.diagnostics) == [
            "policies/p.yaml:6:16: warning: `a.example.com` has no backup pin after 2026-12-02T23:59:59Z, when pin \(backup)… (backup) expires: fewer than two active pins (enforce mode)",
            "policies/p.yaml:9:16: warning: `a.example.com` has no active pin after 2026-12-12T23:59:59Z, when pin \(current)… (current) expires: every connection will be refused with pins_expired (outage)",
        ])
    }

    @Test func theHorizonBoundsTheWalk() throws {
        let tree = try ConfigTree(policies: ["p.yaml": Self.policy])
        let result = tree.loader(horizon: .seconds(15 * 86400)).load()
        #expect(result.warnings.count == 1)
        #expect(result.warnings.first?.message.contains("no backup pin after 2026-12-02") == true)
        #expect(tree.loader(horizon: .seconds(5 * 86400)).load().warnings.isEmpty)
    }

    @Test func singlePinWarnsAtOnceAndReportModeOrUnpinnedHaveNoTimeline() throws {
        let single = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                upgrade_to_tls: true
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}]
              - match: b.example.com
                upgrade_to_tls: true
                pins:
                  mode: report
                  spki_sha256: [{pin: "\(Fixture.pin(1))", not_after: 2026-11-30}]
              - match: c.example.com
            """])
        // The timeline says nothing about b and c; their own warnings say what they are.
        let rendered = single.rendered(single.loader().load().diagnostics)
        #expect(rendered == [
            "policies/p.yaml:4:5: warning: `a.example.com` has no backup pin as of 2026-11-22T12:00:00Z: fewer than two active pins (enforce mode)",
            "policies/p.yaml:9:13: warning: `b.example.com` pins are in report mode: a mismatch is logged and counted, never refused; set `mode: enforce` once no mismatch is reported",
            "policies/p.yaml:11:12: warning: `c.example.com` is intercepted without `pins`: any certificate that verifies for the name is trusted (chain only)",
        ])
    }

    @Test func findingsAreOrderedAndDeduplicated() {
        let now = Fixture.now
        let day: TimeInterval = 86400
        let both = [Pin(hash: Fixture.pin(1), notAfter: now + 3 * day), Pin(hash: Fixture.pin(2), notAfter: now + 3 * day)]
        let findings = PinTimeline.findings(pins: both, now: now, horizon: .seconds(30 * 86400))
        // Both expire together: the outage is the only finding.
        #expect(findings.map(\.kind) == [.outage])
        let later = [Pin(hash: Fixture.pin(1), notBefore: now + 2 * day), Pin(hash: Fixture.pin(2))]
        #expect(PinTimeline.findings(pins: later, now: now, horizon: .seconds(30 * 86400)).map(\.kind) == [.noBackup])
    }

    // The end of pinned coverage (`pin_expiry_timestamp_seconds`): pins handing
    // over to each other without a gap count as one stretch.
    @Test func coverageFollowsAStagedRotationToItsEnd() {
        let now = Fixture.now
        let t = Fixture.date("2026-12-10", bound: .end)
        let a = Pin(hash: Fixture.pin(1), notAfter: t)
        let b = Pin(hash: Fixture.pin(2), notBefore: Fixture.date("2026-12-11"), notAfter: Fixture.date("2027-06-01", bound: .end))
        #expect(PinTimeline.coverage(pins: [a, b], now: now) == .until(Fixture.date("2027-06-01", bound: .end)))
        // After A is gone, B alone.
        #expect(PinTimeline.coverage(pins: [a, b], now: t.addingTimeInterval(1)) == .until(Fixture.date("2027-06-01", bound: .end)))
        // A one-day gap ends coverage at A's end.
        let late = Pin(hash: Fixture.pin(2), notBefore: Fixture.date("2026-12-12"), notAfter: Fixture.date("2027-06-01", bound: .end))
        #expect(PinTimeline.coverage(pins: [a, late], now: now) == .until(t))
        // Nothing active now: none, even with a pin to come.
        #expect(PinTimeline.coverage(pins: [late], now: now) == .none)
        // An undated pin reached without a gap: unbounded; one beyond a gap is not reached.
        let open = Pin(hash: Fixture.pin(3), notBefore: Fixture.date("2026-12-11"))
        #expect(PinTimeline.coverage(pins: [a, open], now: now) == .unbounded)
        let openLate = Pin(hash: Fixture.pin(3), notBefore: Fixture.date("2026-12-12"))
        #expect(PinTimeline.coverage(pins: [a, openLate], now: now) == .until(t))
        // The longest of overlapping pins, whatever their order.
        let short = Pin(hash: Fixture.pin(4), notAfter: Fixture.date("2026-12-01", bound: .end))
        #expect(PinTimeline.coverage(pins: [b, short, a], now: now) == .until(Fixture.date("2027-06-01", bound: .end)))
    }
}
