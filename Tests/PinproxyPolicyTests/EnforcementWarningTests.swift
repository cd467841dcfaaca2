import Foundation
import PinproxyPolicy
import Testing

/// `check` names every intercepted policy whose pins would not refuse
/// anything (report mode, no pins) and every pinned one that plain `http://`
/// requests would bypass, so `check --strict` stops it in CI.
struct EnforcementWarningTests {
    @Test func reportModeUnpinnedAndPlainHTTPBypassAreWarnings() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: report.example.com
                upgrade_to_tls: true
                pins:
                  mode: report
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
              - match: unpinned.example.com
              - match: plain.example.com
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
              - match: said.example.com
                upgrade_to_tls: false
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
              - match: enforced.example.com
                upgrade_to_tls: true
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
              - match: tunnelled.example.com
                action: tunnel
              - match: denied.example.com
                action: deny
            """])
        let result = tree.loader().load()
        #expect(result.snapshot != nil)
        #expect(tree.rendered(result.diagnostics) == [
            "policies/p.yaml:5:13: warning: `report.example.com` pins are in report mode: a mismatch is logged and counted, never refused; set `mode: enforce` once no mismatch is reported",
            "policies/p.yaml:7:12: warning: `unpinned.example.com` is intercepted without `pins`: any certificate that verifies for the name is trusted (chain only)",
            "policies/p.yaml:8:12: warning: `plain.example.com` is pinned, but plain `http://` requests for it (through HTTP_PROXY) bypass its pins and TLS settings: set `upgrade_to_tls: true` to send them upstream over pinned TLS",
            "policies/p.yaml:12:21: warning: `said.example.com` is pinned, but plain `http://` requests for it (through HTTP_PROXY) bypass its pins and TLS settings: set `upgrade_to_tls: true` to send them upstream over pinned TLS",
        ])
        // A CI gate sees each of them.
        let strict = CheckReport(diagnostics: result.diagnostics, strict: true)
        #expect(!strict.isValid)
        #expect(strict.errors.count == 4)
    }
}
