import Foundation
import PinproxyPolicy
import Testing

/// `explain` (docs/contract.md §13): the policy a host matches, the forms the
/// matcher looked up, the pins active at an instant and the answer in words.
struct RequestExplanationTests {
    static let policies = """
        hosts:
          - match: api.example.com
            pins:
              spki_sha256:
                - { pin: "\(Fixture.pin(1))", note: intermediate }
                - { pin: "\(Fixture.pin(2))", not_after: 2026-12-10T00:00:00Z, note: old root }
            auth: { spotify: app }
          - match: "*.cdn.example.com"
            action: tunnel
          - match: "**.example.com"
            ports: [443, 8443]
            pins:
              mode: report
              spki_sha256: [{pin: "\(Fixture.pin(3))"}, {pin: "\(Fixture.pin(4))"}]
          - match: blocked.example.org
            action: deny
        """
    static let main = """
        policies: policies
        spotify:
          sessions:
            app: { flow: client_credentials, client_id: abc, client_secret: not-shown }
        """

    func snapshot() throws -> PolicySnapshot {
        let tree = try ConfigTree(main: Self.main, policies: ["p.yaml": Self.policies])
        let result = tree.loader().load()
        return try #require(result.snapshot, "\(result.diagnostics)")
    }

    @Test func anExactHostWinsOverTheWildcardsAndHasItsPinsAndSession() throws {
        let e = RequestExplanation(host: "API.example.com", port: 443, snapshot: try snapshot(), at: Fixture.now, horizon: .seconds(30 * 86400))
        #expect(e.host == "api.example.com")
        #expect(e.lookups.map(\.pattern) == ["api.example.com", "*.example.com", "**.api.example.com", "**.example.com", "**.com"])
        #expect(e.lookups.compactMap(\.policy) == ["api.example.com", "**.example.com"], "both holders are shown; the first wins")
        #expect(e.policy?.match.text == "api.example.com")
        #expect(e.policy?.auth?.spotifySession == "app")
        #expect(e.activePins.map(\.hash) == [Fixture.pin(1), Fixture.pin(2)])
        #expect(e.timelineWarnings == ["fewer than two active pins from 2026-12-10T00:00:00Z: no backup pin"])
        #expect(e.answerText.hasPrefix("intercepted: policy api.example.com"))
        #expect(e.answerText.hasSuffix("otherwise 502 pin_mismatch"))
    }

    @Test func aWildcardMatchTunnelsOrReports() throws {
        let snapshot = try snapshot()
        let tunnel = RequestExplanation(host: "img.cdn.example.com", port: 443, snapshot: snapshot, at: Fixture.now, horizon: .seconds(86400))
        #expect(tunnel.policy?.match.text == "*.cdn.example.com")
        guard case .tunnelled = tunnel.answer else { Issue.record("\(tunnel.answer)"); return }
        let deep = RequestExplanation(host: "a.b.example.com", port: 8443, snapshot: snapshot, at: Fixture.now, horizon: .seconds(86400))
        #expect(deep.policy?.match.text == "**.example.com")
        #expect(deep.answerText.contains("report mode"))
    }

    /// Issue 27 item 10: `explain HOST:PORT` judges the port as a CONNECT would.
    @Test func aPortOutsideThePolicysPortsIsRefused() throws {
        let snapshot = try snapshot()
        func answer(_ host: String, _ port: Int) -> String {
            RequestExplanation(host: host, port: port, snapshot: snapshot, at: Fixture.now, horizon: .seconds(86400)).answerText
        }
        let tunnel = answer("img.cdn.example.com", 8443)
        #expect(tunnel.hasPrefix("403 port_denied: policy *.cdn.example.com ("), "\(tunnel)")
        #expect(tunnel.hasSuffix("does not allow port 8443 of img.cdn.example.com (no `ports:`, so CONNECT may reach only 443); list 8443 under its `ports:` to allow it"),
                "\(tunnel)")
        let plain = answer("api.example.com", 80)
        #expect(plain.hasPrefix("403 port_denied: policy api.example.com"))
        #expect(plain.hasSuffix("an absolute-form http://api.example.com:80/ request is allowed"), "\(plain)")
        #expect(answer("a.b.example.com", 9443).contains("(ports: [443, 8443])"))
        #expect(answer("a.b.example.com", 8443).hasPrefix("intercepted:"))
        #expect(answer("blocked.example.org", 8443).hasPrefix("403 host_denied:"), "a denied host is denied before its port")
        #expect(answer("elsewhere.test", 8443).hasPrefix("403 host_denied:"))
    }

    @Test func anUnmatchedHostIsDeniedByDefault() throws {
        let e = RequestExplanation(host: "elsewhere.test", port: 443, snapshot: try snapshot(), at: Fixture.now, horizon: .seconds(86400))
        #expect(e.policy == nil)
        #expect(e.lookups.allSatisfy { $0.policy == nil })
        #expect(e.answerText == "403 host_denied: no policy matches elsewhere.test and default_action is deny")
        let denied = RequestExplanation(host: "blocked.example.org", port: 443, snapshot: try snapshot(), at: Fixture.now, horizon: .seconds(86400))
        #expect(denied.answerText.hasPrefix("403 host_denied: policy blocked.example.org"))
    }

    @Test func afterAPinExpiresItIsInactiveAndTheRestStillServe() throws {
        let later = Fixture.date("2026-12-11T00:00:00Z")
        let e = RequestExplanation(host: "api.example.com", port: 443, snapshot: try snapshot(), at: later, horizon: .seconds(86400))
        #expect(e.activePins.map(\.hash) == [Fixture.pin(1)])
        #expect(e.inactivePins.map(\.why) == ["expired 2026-12-10T00:00:00Z"])
        #expect(e.timelineWarnings.first?.hasPrefix("fewer than two active pins") == true)
        #expect(e.answerText.contains("1 active pin;"))
    }

    @Test func withNoActivePinAndOnExpiryFailTheAnswerIsPinsExpired() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: gone.example.com
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))", not_after: 2026-12-01T00:00:00Z}]
            """])
        let snapshot = try #require(tree.loader().load().snapshot)
        let e = RequestExplanation(host: "gone.example.com", port: 443, snapshot: snapshot, at: Fixture.date("2027-01-01T00:00:00Z"), horizon: .seconds(86400))
        #expect(e.answerText.hasPrefix("502 pins_expired: policy gone.example.com"))
    }
}
