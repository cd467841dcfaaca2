import PinproxyPolicy
import Testing

/// docs/contract.md §10: exact, then `*.` (one label), then `**.` (longest suffix first).
struct HostMatchingTests {
    static let matcher = HostMatcher<String>([
        "api.x.com", "*.x.com", "**.x.com", "**.b.x.com", "*.b.x.com", "**.y.org", "Upper.Example.COM.",
    ].map { (try! HostPattern(parsing: $0), $0) })

    @Test(arguments: [
        ("api.x.com", "api.x.com"),          // exact beats *. and **.
        ("API.X.COM.", "api.x.com"),         // case-insensitive, trailing dot ignored
        ("www.x.com", "*.x.com"),            // *. beats **.
        ("a.b.x.com", "*.b.x.com"),          // *. beats **., also at depth
        ("c.a.b.x.com", "**.b.x.com"),       // longest **. suffix first
        ("q.r.x.com", "**.x.com"),           // *.x.com does not match two labels
        ("x.com", "**.x.com"),               // **.x.com matches x.com itself
        ("b.x.com", "*.x.com"),
        ("y.org", "**.y.org"),
        ("upper.example.com", "Upper.Example.COM."),
    ])
    func picksTheMostSpecific(host: String, expected: String) {
        #expect(Self.matcher.match(host) == expected)
    }

    @Test(arguments: ["x.org", "notx.com", "y.org.evil", "", "com"])
    func matchesNothingElse(host: String) {
        #expect(Self.matcher.match(host) == nil)
    }

    @Test func patternsMatchOnTheirOwn() throws {
        let single = try HostPattern(parsing: "*.x.com")
        #expect(single.matches("a.x.com"))
        #expect(!single.matches("a.b.x.com"))
        #expect(!single.matches("x.com"))
        let deep = try HostPattern(parsing: "**.x.com")
        #expect(deep.matches("x.com") && deep.matches("a.b.x.com") && !deep.matches("ax.com"))
    }

    @Test(arguments: ["a.*.com", "*", "**.", "x..com", "*.10.0.0.1"])
    func rejectsMalformedPatterns(text: String) {
        #expect(throws: HostPatternError.self) { try HostPattern(parsing: text) }
    }

    @Test func snapshotLookupUsesTheSameRules() throws {
        let tree = try ConfigTree(main: "policies: policies\ndefault_action: tunnel\n", policies: ["p.yaml": """
            hosts:
              - {match: "**.x.com", action: deny}
              - {match: "api.x.com", action: tunnel}
            """])
        let snapshot = try #require(tree.loader().load().snapshot)
        #expect(snapshot.policy(forHost: "api.x.com")?.action == .tunnel)
        #expect(snapshot.policy(forHost: "x.com")?.action == .deny)
        #expect(snapshot.policy(forHost: "other.org") == nil)
        #expect(snapshot.defaultAction == .tunnel)
    }
}
