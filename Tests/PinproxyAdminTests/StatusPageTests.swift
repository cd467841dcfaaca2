import Foundation
import PinproxyAdmin
import PinproxyPolicy
import PinproxySpotify
import PinproxyTestSupport
import Testing

/// The status page's model and HTML (docs/contract.md §13), with a fixed clock:
/// the timeline's bars and stretches, escaping, and the route's headers.
struct StatusPageTests {
    static let policies = """
        hosts:
          - match: steady.example.com
            pins:
              spki_sha256:
                - { pin: "\(AdminFixture.pin(1))", note: "intermediate <b>bold</b>" }
                - { pin: "\(AdminFixture.pin(2))" }
          - match: losing.example.com
            pins:
              spki_sha256:
                - { pin: "\(AdminFixture.pin(1))" }
                - { pin: "\(AdminFixture.pin(2))", not_after: 2026-12-20T00:00:00Z }
                - { pin: "\(AdminFixture.pin(3))", not_before: 2027-06-01T00:00:00Z }
              transition: {from: 2026-12-01, until: 2026-12-05}
          - match: ending.example.com
            pins:
              spki_sha256: [{ pin: "\(AdminFixture.pin(1))", not_after: 2027-01-21T12:00:00Z }]
          - match: elsewhere.example.com
            action: tunnel
        """

    func model(observed: [ObservedHost] = [], sessions: [SessionSummary] = []) throws -> StatusPageModel {
        let store = try AdminFixture(policies: Self.policies).store()
        return StatusPageModel(snapshot: store.snapshot, lastReload: nil, now: AdminFixture.now, probe: { _ in nil },
                               verdicts: { $0 == "steady.example.com" ? ["match": 7, "mismatch_reported": 1] : [:] },
                               observed: observed, sessions: sessions)
    }

    @Test func theTimelineHasABarPerPinInTheWindowAndMarksTheThinStretches() throws {
        let model = try model()
        let hosts = Dictionary(uniqueKeysWithValues: model.hosts.map { ($0.pattern, $0) })
        let steady = try #require(hosts["steady.example.com"]?.timeline)
        #expect(steady.bars.count == 2)
        #expect(steady.stretches.isEmpty && steady.headline == nil)
        let losing = try #require(hosts["losing.example.com"]?.timeline)
        // The third pin starts after the 90 days: nothing to draw.
        #expect(losing.bars.count == 2)
        #expect(losing.stretches.map(\.kind) == [.warning])
        #expect(losing.stretches.first?.from == DateText.parse("2026-12-20T00:00:00Z", bound: .start))
        #expect(losing.stretches.first?.until == losing.end)
        #expect(losing.transition?.from == DateText.parse("2026-12-01", bound: .start))
        #expect(losing.headline == "fewer than two active pins from 2026-12-20T00:00:00Z: no backup")
        let ending = try #require(hosts["ending.example.com"]?.timeline)
        #expect(ending.stretches.map(\.kind) == [.warning, .outage])
        #expect(hosts["elsewhere.example.com"]?.timeline == nil, "a tunnel has no pins to draw")
    }

    /// Which credential a policy's requests carry, by name and header, never
    /// a value (issue 31 item 6): one for every client, or one per identity.
    @Test func aPolicyShowsWhichCredentialItsRequestsCarry() throws {
        let named = AuthPolicy(choice: .named("github"), header: "Authorization", format: "token {token}")
        #expect(StatusPageModel.credentialSummary(named) == "github in Authorization (token {token})")
        let perClient = AuthPolicy(choice: .byClient(["reports": "idp-reports", "billing": "idp"], fallback: nil, require: true),
                                   header: "X-Api-Key", format: "{token}")
        #expect(StatusPageModel.credentialSummary(perClient)
                == "billing: idp, reports: idp-reports; others: refused (client_denied) in X-Api-Key ({token})")
        var model = try model()
        model.hosts[0].credential = StatusPageModel.credentialSummary(named)
        let html = StatusPageHTML.render(model)
        #expect(html.contains("<dt>credential</dt><dd data-kind=\"credential\">github in Authorization (token {token})</dd>"))
        #expect(model.hosts.dropFirst().allSatisfy { $0.credential == nil }, "a policy without auth shows no credential")
    }

    /// The page leads with what fails now (issue 28 item 12): refusals by the
    /// pins in the last 10 minutes and failed probes, in red, above the
    /// expiry banner and the host cards; an old refusal is not "now".
    @Test func whatIsFailingNowLeadsInRed() throws {
        let store = try AdminFixture(policies: Self.policies).store()
        let now = AdminFixture.now
        let model = StatusPageModel(
            snapshot: store.snapshot, lastReload: nil, now: now,
            probe: { pattern in
                pattern == "ending.example.com"
                    ? ProbeStatus(success: false, at: now - 60, error: "verify_failed", detail: "unable to get local issuer certificate")
                    : ProbeStatus(success: true, at: now - 30, verdict: "match")
            },
            verdicts: { $0 == "steady.example.com" ? ["match": 7, "mismatch_enforced": 3] : [:] }, observed: [], sessions: [],
            refusals: { pattern, since in
                pattern == "steady.example.com"
                    ? [(now - 3600, RefusalCode.pinMismatch), (now - 120, .pinMismatch), (now - 60, .pinMismatch)].filter { $0.0 >= since } : []
            })
        #expect(model.failing.map(\.pattern) == ["steady.example.com", "ending.example.com"])
        let html = StatusPageHTML.render(model)
        let failing = try #require(html.range(of: "data-kind=\"failing\""))
        #expect(html[..<failing.lowerBound].contains("class=\"alert outage\""))
        #expect(failing.lowerBound < (try #require(html.range(of: "data-kind=\"summary\""))).lowerBound, "before the expiry banner")
        #expect(failing.lowerBound < (try #require(html.range(of: "id=\"hosts\""))).lowerBound, "before the cards")
        #expect(html.contains("<li data-failing=\"steady.example.com\"><strong>steady.example.com</strong>: 2 client connections refused (pin_mismatch) in the last 10 minutes"))
        #expect(html.contains("<li data-failing=\"ending.example.com\"><strong>ending.example.com</strong>: last probe failed (verify_failed)"))
        #expect(!html.contains("data-failing=\"losing.example.com\""))
        #expect(html.contains("<article class=\"host failing\" data-policy=\"steady.example.com\">"))
        #expect(html.contains("<span class=\"bad\">mismatch_enforced 3</span>"), "the refusing verdict is red, not black")
        #expect(html.contains("<article class=\"host\" data-policy=\"losing.example.com\">"))
    }

    /// After a rotation, the leaf seen by traffic since the last probe is the
    /// one the page shows (issue 28 item 13), not the probe's older one.
    @Test func theLeafExpiryIsTheOneSeenLast() throws {
        let now = AdminFixture.now
        let old = now + 10 * 86_400, renewed = now + 90 * 86_400
        let chain = { (notAfter: Date, seen: Date) in
            ObservedChain(certificates: [ObservedCertificateInfo(spkiSHA256: AdminFixture.pin(4), subject: "CN=steady.example.com",
                                                                 issuer: "CN=CA", notBefore: now - 86_400, notAfter: notAfter)],
                          firstSeen: seen, lastSeen: seen, count: 1)
        }
        let probe = ProbeStatus(success: true, at: now - 600, leafNotAfter: old, verdict: "match")
        let afterProbe = ObservedHost(host: "steady.example.com", policy: "steady.example.com", chains: [chain(renewed, now - 60)], lastSeen: now - 60)
        #expect(StatusPageModel.latestLeaf(probe: probe, observed: [afterProbe]) == renewed)
        let beforeProbe = ObservedHost(host: "steady.example.com", policy: "steady.example.com", chains: [chain(renewed, now - 900)], lastSeen: now - 900)
        #expect(StatusPageModel.latestLeaf(probe: probe, observed: [beforeProbe]) == old)
        #expect(StatusPageModel.latestLeaf(probe: nil, observed: [afterProbe]) == renewed)
    }

    @Test func theHTMLEscapesWhatItShowsAndLoadsNothing() throws {
        let session = SessionSummary(name: "app<1>", flow: "client_credentials", status: .needsReauthorization(reason: "invalid_grant"))
        let html = StatusPageHTML.render(try model(sessions: [session]))
        #expect(html.contains("intermediate &lt;b&gt;bold&lt;/b&gt;"))
        #expect(!html.contains("<b>bold</b>"))
        #expect(html.contains("app&lt;1&gt;") && html.contains("needs re-authorisation (invalid_grant)"))
        #expect(html.contains("match 7 · mismatch_reported 1"))
        #expect(html.contains("<meta http-equiv=\"refresh\" content=\"30\">"))
        #expect(!html.contains("<script") && !html.contains("src=") && !html.contains("href="))
        #expect(html.components(separatedBy: "data-kind=\"timeline-warning\"").count - 1 == 2, "losing and ending")
        #expect(html.components(separatedBy: "data-kind=\"pin\"").count - 1 == 5)
    }

    /// Issue 27 item 6: a combining mark or a prepended format character
    /// makes `<` or `"` part of a larger grapheme cluster; the escaping must
    /// still catch it. A parent proxy's reason phrase reaches the page as a
    /// probe's detail, a session name sits in an attribute.
    @Test func escapingHoldsAgainstCombiningMarks() throws {
        let detail = "parent proxy said 502 \u{0600}<meta http-equiv=refresh content=0;url=data:,x>"
        let probe = ProbeStatus(success: false, at: AdminFixture.now, error: "upstream_connect_failed", detail: detail)
        let session = SessionSummary(name: "a\"\u{0301} onclick=\"x", flow: "client_credentials", status: .needsReauthorization(reason: "e\u{0301}<i>"))
        let store = try AdminFixture(policies: Self.policies).store()
        let model = StatusPageModel(snapshot: store.snapshot, lastReload: nil, now: AdminFixture.now,
                                    probe: { $0 == "steady.example.com" ? probe : nil }, verdicts: { _ in [:] },
                                    observed: [], sessions: [session])
        let html = StatusPageHTML.render(model)
        // Bytes, not Characters: a Character search has the same blind spot.
        func has(_ needle: String) -> Bool { Data(html.utf8).range(of: Data(needle.utf8)) != nil }
        // The needles are built outside `#expect`: its expansion trips over these literals.
        let rawMeta = "<meta http-equiv=refresh"
        let escapedMeta = "\u{0600}&lt;meta http-equiv=refresh content=0;url=data:,x&gt;"
        let rawQuote = "\"\u{0301} onclick"
        let escapedAttribute = "data-session=\"a&quot;\u{0301} onclick=&quot;x\""
        let escapedReason = "e\u{0301}&lt;i&gt;"
        let rawItalic = "<i>"
        let checks: KeyValuePairs<String, Bool> = [
            "no raw meta tag": !has(rawMeta), "the probe detail escaped": has(escapedMeta),
            "no raw quote in the attribute": !has(rawQuote), "the session name escaped": has(escapedAttribute),
            "no raw italic tag": !has(rawItalic), "the reason escaped": has(escapedReason),
        ]
        let failed = checks.filter { !$0.value }.map(\.key)
        #expect(failed.isEmpty, "\(failed)")
    }

    @Test func theRouteServesTheHTMLUnderAStrictPolicy() async throws {
        let store = try AdminFixture(policies: Self.policies).store()
        let leaf = ObservedCertificateInfo(spkiSHA256: AdminFixture.pin(9), subject: "CN=steady.example.com", issuer: "CN=Inter",
                                           notBefore: AdminFixture.now - 86400, notAfter: AdminFixture.now + 30 * 86400)
        let seen = ObservedHost(host: "steady.example.com", policy: "steady.example.com", chains: [
            ObservedChain(certificates: [leaf], firstSeen: AdminFixture.now, lastSeen: AdminFixture.now, count: 3),
        ], lastSeen: AdminFixture.now)
        let providers = AdminServer.Providers(readiness: { ReadinessStatus(listening: true, policyLoaded: true, caUsable: true) },
                                              observed: { [seen] })
        try await withAdminServer(store: store, providers: providers) { client in
            let response = try await client.get("/")
            #expect(response.status == 200)
            #expect(response.headers["content-security-policy"] == StatusPageHTML.contentSecurityPolicy)
            #expect(response.headers["content-type"] == "text/html; charset=utf-8")
            #expect(response.body.contains("data-policy=\"losing.example.com\""))
            #expect(response.body.contains("steady.example.com (1 chain)"), "the chains seen are on the page")
            let policies = try await client.get("/policies").json()
            let observed = try #require((policies["observed"] as? [[String: Any]])?.first)
            #expect(Set(observed.keys) == ["host", "policy", "last_seen", "chains"])
            let chain = try #require((observed["chains"] as? [[String: Any]])?.first)
            #expect(chain["count"] as? Int == 3 && chain["first_seen"] as? String == "2026-11-22T12:00:00Z")
            let certificate = try #require((chain["certificates"] as? [[String: Any]])?.first)
            #expect(certificate["pin"] as? String == AdminFixture.pin(9))
            #expect(Set(certificate.keys) == ["pin", "subject", "issuer", "not_before", "not_after"])
            #expect(try await client.post("/").status == 405)
        }
    }
}
