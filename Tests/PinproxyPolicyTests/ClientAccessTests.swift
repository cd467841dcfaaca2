import Foundation
import PinproxyPolicy
import Testing

/// docs/contract.md §15: the hash format, the admission decision, the failure limiter.
struct PasswordHashTests {
    @Test func madeHashRoundTripsAndVerifies() throws {
        let hash = PasswordHash.make(password: "s3cret", iterations: 10_000)
        #expect(hash.encoded.hasPrefix("$pbkdf2-sha256$i=10000$"))
        let parsed = try PasswordHash(parsing: hash.encoded)
        #expect(parsed == hash)
        #expect(parsed.verify("s3cret"))
        #expect(!parsed.verify("s3cret "))
        #expect(!parsed.verify(""))
        #expect(!"\(hash)".contains(hash.encoded.split(separator: "$").last!), "description must not show the hash")
    }

    @Test func twoHashesOfOnePasswordDiffer() {
        #expect(PasswordHash.make(password: "x", iterations: 10_000).encoded != PasswordHash.make(password: "x", iterations: 10_000).encoded)
    }

    /// A hash from another implementation (Python's hashlib over OpenSSL):
    /// `hashlib.pbkdf2_hmac("sha256", b"billing-pw", b"0123456789abcdef", 10000)`.
    @Test func verifiesAHashMadeElsewhere() throws {
        let salt = Data("0123456789abcdef".utf8).base64EncodedString()
        let hash = try PasswordHash(parsing: "$pbkdf2-sha256$i=10000$\(salt)$\(Self.pythonHash)")
        #expect(hash.verify("billing-pw"))
    }
    static let pythonHash = "U3PsRcomLDtuOxHec24C8txDL8+aiwlQXFfR0OaM42s="

    @Test(arguments: [
        ("", "is not `$pbkdf2-sha256$i=ITERATIONS$SALT$HASH` (make one with `pinproxy passwd`)"),
        ("$bcrypt$i=10000$AAAAAAAAAAA=$AAAA", "uses scheme `bcrypt`; pinproxy knows only `pbkdf2-sha256` (make one with `pinproxy passwd`)"),
        ("$pbkdf2-sha256$10000$AAAAAAAAAAA=$AAAA", "has `10000` where `i=ITERATIONS` belongs"),
        ("$pbkdf2-sha256$i=99$AAAAAAAAAAA=$AAAA", "has 99 iterations; between 10000 and 10000000 are accepted"),
        ("$pbkdf2-sha256$i=10000$AAAA$AAAA", "has a salt that is not at least 8 bytes of base64"),
        ("$pbkdf2-sha256$i=10000$AAAAAAAAAAA=$AAAA", "has a hash that is not 32 bytes of base64"),
    ])
    func malformedHashesSayWhy(text: String, message: String) {
        #expect(throws: PasswordHashError(message: message)) { try PasswordHash(parsing: text) }
    }
}

struct ClientAdmissionTests {
    static let hash = PasswordHash(iterations: 10_000, salt: Array(repeating: 1, count: 16), hash: Array(repeating: 2, count: 32))
    static let here = SourceLocation(file: "p.yaml", line: 3, column: 14)

    static func config(require: Bool = false, billingFrom: [String] = []) -> PinproxyConfig {
        var config = PinproxyConfig.defaults(workingDirectory: "/")
        config.identities = [
            "billing": ClientIdentity(name: "billing", passwordHash: hash, from: billingFrom.map { try! CIDR(parsing: $0) }, location: here),
            "reports": ClientIdentity(name: "reports", passwordHash: hash, from: [], location: here),
        ]
        config.requireIdentity = require
        return config
    }

    static func policy(_ clients: [String]?) throws -> HostPolicySpec {
        let tree = try ConfigTree(policies: ["p.yaml": "hosts:\n  - match: api.example.com\n    action: tunnel\n"])
        var spec = try #require(tree.loader().load().snapshot?.policies.first?.spec)
        spec.clients = clients?.map { ClientRule.parse($0, location: here) }
        return spec
    }

    static func who(_ identity: String?, _ address: String = "10.1.2.3") -> ClientPrincipal {
        ClientPrincipal(address: IPAddress.parse(address), identity: identity)
    }

    @Test func noClientsListAdmitsEveryone() throws {
        let policy = try Self.policy(nil)
        #expect(ClientAdmission.decide(Self.who(nil), host: "api.example.com", policy: policy, config: Self.config()) == .admitted)
        #expect(ClientAdmission.decide(Self.who("reports"), host: "api.example.com", policy: policy, config: Self.config()) == .admitted)
        #expect(ClientAdmission.decide(Self.who(nil), host: "x", policy: nil, config: Self.config()) == .admitted)
    }

    @Test func identityListedIsAdmittedOthersDeniedNamingTheRule() throws {
        let policy = try Self.policy(["billing", "10.2.3.0/24"])
        #expect(ClientAdmission.decide(Self.who("billing"), host: "api.example.com", policy: policy, config: Self.config()) == .admitted)
        guard case .denied(let detail) = ClientAdmission.decide(Self.who("reports"), host: "api.example.com", policy: policy, config: Self.config()) else {
            Issue.record("reports must be denied")
            return
        }
        #expect(detail.contains("policy api.example.com"))
        #expect(detail.contains("admits only [billing, 10.2.3.0/24]"))
        #expect(detail.contains("identity reports is not among them"))
    }

    @Test func networkRuleAdmitsAnonymousClientsInIt() throws {
        let policy = try Self.policy(["10.2.3.0/24"])
        #expect(ClientAdmission.decide(Self.who(nil, "10.2.3.9"), host: "h", policy: policy, config: Self.config()) == .admitted)
        // An identity is admitted by its address too: the rules are alternatives.
        #expect(ClientAdmission.decide(Self.who("reports", "10.2.3.9"), host: "h", policy: policy, config: Self.config()) == .admitted)
        guard case .denied = ClientAdmission.decide(Self.who(nil, "10.9.9.9"), host: "h", policy: policy, config: Self.config()) else {
            Issue.record("an anonymous client outside the network must get 403: no credential would help")
            return
        }
    }

    @Test func anonymousClientGets407WhereAnIdentityWouldBeAdmitted() throws {
        let policy = try Self.policy(["billing"])
        guard case .credentialRequired = ClientAdmission.decide(Self.who(nil), host: "h", policy: policy, config: Self.config()) else {
            Issue.record("expected 407")
            return
        }
    }

    @Test func requireIdentityRefusesAnonymousEverywhere() {
        guard case .credentialRequired(let detail) = ClientAdmission.decide(Self.who(nil), host: "h", policy: nil, config: Self.config(require: true)) else {
            Issue.record("expected 407")
            return
        }
        #expect(detail.contains("require_identity"))
        #expect(ClientAdmission.decide(Self.who("reports"), host: "h", policy: nil, config: Self.config(require: true)) == .admitted)
    }

    @Test func fromRefusesTheRightIdentityFromTheWrongNetwork() throws {
        let config = Self.config(billingFrom: ["127.0.0.1/32"])
        #expect(ClientAdmission.decide(Self.who("billing", "127.0.0.1"), host: "h", policy: nil, config: config) == .admitted)
        guard case .denied(let detail) = ClientAdmission.decide(Self.who("billing", "127.0.0.2"), host: "h", policy: nil, config: config) else {
            Issue.record("expected 403")
            return
        }
        #expect(detail == "identity billing may connect only from 127.0.0.1/32 (clients.identities.billing.from); 127.0.0.2 is outside")
    }

    @Test func emptyClientsListAdmitsNobody() throws {
        let policy = try Self.policy([])
        guard case .denied(let detail) = ClientAdmission.decide(Self.who("billing"), host: "h", policy: policy, config: Self.config()) else {
            Issue.record("expected 403")
            return
        }
        #expect(detail.contains("admits no client"))
    }
}

struct FailureLimiterTests {
    let start = ContinuousClock.now
    let address: [UInt8] = [127, 0, 0, 2]

    @Test func blocksAfterTheLimitUntilTheWindowEnds() {
        var limiter = FailureLimiter(limits: .init(maxFailures: 3, window: .seconds(60), maxTracked: 100))
        for i in 0..<3 {
            #expect(limiter.blocked(address, user: "app", now: start + .seconds(i)) == nil)
            limiter.failed(address, user: "app", now: start + .seconds(i))
        }
        #expect(limiter.blocked(address, user: "app", now: start + .seconds(3)) == .seconds(57))
        #expect(limiter.blocked([127, 0, 0, 3], user: "app", now: start + .seconds(3)) == nil, "another address is not affected")
        #expect(limiter.blocked(address, user: "app", now: start + .seconds(59)) == .seconds(1))
        #expect(limiter.blocked(address, user: "app", now: start + .seconds(60)) == nil)
        // A new window starts with the next failure.
        limiter.failed(address, user: "app", now: start + .seconds(61))
        #expect(limiter.blocked(address, user: "app", now: start + .seconds(61)) == nil)
    }

    /// One table row: failures by (user) from one address, then who is blocked.
    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var failures: [String]
        var blocked: [String]
        var free: [String]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "a stale password blocks its own name only", failures: Array(repeating: "billing", count: 3),
            blocked: ["billing"], free: ["reports", ""]),
        Row(name: "below the cap nothing is blocked", failures: ["billing", "billing", "reports", "reports"],
            blocked: [], free: ["billing", "reports", "other"]),
        Row(name: "guessing across names hits the per-address cap", failures: (0..<9).map { "guess\($0)" },
            blocked: ["billing", "reports", "guess0", ""], free: []),
        Row(name: "unreadable credentials count under the empty name", failures: ["", "", ""],
            blocked: [""], free: ["billing"]),
    ]

    @Test(arguments: rows)
    func perUserAndPerAddress(row: Row) {
        // 3 per (address, name), 9 per address.
        var limiter = FailureLimiter(limits: .init(maxFailures: 3, maxFailuresPerAddress: 9, window: .seconds(60), maxTracked: 100))
        for (i, user) in row.failures.enumerated() { limiter.failed(address, user: user, now: start + .milliseconds(i)) }
        let now = start + .seconds(1)
        for user in row.blocked { #expect(limiter.blocked(address, user: user, now: now) != nil, "\(user) should be blocked") }
        for user in row.free { #expect(limiter.blocked(address, user: user, now: now) == nil, "\(user) should be free") }
        for user in row.blocked + row.free {
            #expect(limiter.blocked([10, 9, 9, 9], user: user, now: now) == nil, "another address is never affected")
        }
    }

    @Test func tableStaysBounded() {
        var limiter = FailureLimiter(limits: .init(maxFailures: 1, window: .seconds(60), maxTracked: 4))
        for i in 0..<10 { limiter.failed([10, 0, 0, UInt8(i)], user: "u", now: start + .seconds(i)) }
        #expect(limiter.trackedCount == 4)
        #expect(limiter.trackedAddressCount == 4)
        // The newest addresses are the ones kept.
        #expect(limiter.blocked([10, 0, 0, 9], user: "u", now: start + .seconds(10)) != nil)
        // Many names from one address: the per-name table stays bounded too.
        for i in 0..<10 { limiter.failed(address, user: "name\(i)", now: start + .seconds(20 + i)) }
        #expect(limiter.trackedCount == 4)
    }

    @Test func standardLimits() {
        #expect(FailureLimiter.Limits.standard == .init(maxFailures: 10, maxFailuresPerAddress: 100, window: .seconds(60), maxTracked: 10_000))
    }
}

struct ProxyCredentialTests {
    @Test func parsesBasic() {
        let credential = ProxyCredential(headerValue: "Basic " + Data("billing:pa:ss".utf8).base64EncodedString())
        #expect(credential?.user == "billing")
        #expect(credential?.password == "pa:ss")
        #expect(ProxyCredential(headerValue: "basic " + Data("a:b".utf8).base64EncodedString())?.user == "a")
        #expect(ProxyCredential(headerValue: "Bearer abc") == nil)
        #expect(ProxyCredential(headerValue: "Basic !!!") == nil)
        #expect(ProxyCredential(headerValue: "Basic " + Data("nocolon".utf8).base64EncodedString()) == nil)
        #expect(!"\(credential!)".contains("pa:ss"))
    }
}

/// `clients.identities`, `require_identity`, a policy's `clients:` and
/// `upstream_proxy:` as `check` reads them: errors at FILE:LINE:COL naming the key.
struct ClientsConfigTests {
    static let hash = PasswordHash(iterations: 10_000, salt: Array(repeating: 1, count: 16), hash: Array(repeating: 2, count: 32)).encoded

    static func main(_ identities: String, extra: String = "") -> String {
        "policies: policies\nclients:\n  identities:\n\(identities)\(extra)"
    }

    @Test func validIdentitiesAndPolicyLoad() throws {
        let tree = try ConfigTree(main: Self.main("""
                billing:
                  password_hash: "\(Self.hash)"
                  from: [10.1.0.0/16]
                reports:
                  password_hash_file: reports.hash

            """, extra: "  require_identity: true\n"), policies: ["p.yaml": """
            hosts:
              - match: api.example.com
                action: tunnel
                clients: [billing, 10.2.3.0/24, 192.168.1.7]
                upstream_proxy: http://parent:${PARENT_PW}@127.0.0.1:3128
            """])
        try tree.write("reports.hash", Self.hash + "\n")
        let result = tree.loader(environment: ["PARENT_PW": "p@ss"]).load()
        #expect(result.errors.isEmpty, "\(tree.rendered(result.errors))")
        let snapshot = try #require(result.snapshot)
        #expect(snapshot.config.requireIdentity)
        #expect(snapshot.config.identities.keys.sorted() == ["billing", "reports"])
        #expect(snapshot.config.identities["billing"]?.from.map(\.description) == ["10.1.0.0/16"])
        let spec = try #require(snapshot.policies.first?.spec)
        #expect(spec.clients?.map(\.description) == ["billing", "10.2.3.0/24", "192.168.1.7/32"])
        #expect(spec.upstreamProxy?.description == "http://127.0.0.1:3128")
        #expect(spec.upstreamProxy?.credentials?.reveal() == "parent:p@ss")
    }

    @Test func unknownIdentityInAPolicyIsAnErrorAtItsItem() throws {
        let tree = try ConfigTree(main: Self.main("    billing:\n      password_hash: \"\(Self.hash)\"\n"), policies: ["p.yaml": """
            hosts:
              - match: api.example.com
                clients: [billing, biling]
            """])
        let result = tree.loader().load()
        #expect(tree.rendered(result.errors) == [
            "policies/p.yaml:3:24: error: `clients` names identity `biling`, which `clients.identities` of the main file does not define; did you mean `billing`?; a network must be written as a CIDR such as 10.0.0.0/8",
        ])
    }

    @Test func malformedHashBadCIDRAndUnknownKeyAreErrorsAtTheirPlace() throws {
        let tree = try ConfigTree(main: Self.main("""
                billing:
                  password_hash: "$pbkdf2-sha256$i=5$AAAA$AAAA"
                  from: [10.1.0.0/33]
                reports:
                  pasword_hash: x

            """), policies: ["p.yaml": """
            hosts:
              - match: api.example.com
                clients: [10.2.3.0/99]
                upstream_proxy: https://parent:3128
            """])
        let result = tree.loader().load()
        let rendered = tree.rendered(result.errors)
        #expect(rendered.contains("pinproxy.yaml:5:22: error: identity `billing`: `password_hash` has 5 iterations; between 10000 and 10000000 are accepted"), "\(rendered)")
        #expect(rendered.contains { $0.hasPrefix("pinproxy.yaml:6:14: error:") && $0.contains("10.1.0.0/33") }, "\(rendered)")
        #expect(rendered.contains("pinproxy.yaml:8:7: error: unknown key `pasword_hash` in `clients.identities.*`; did you mean `password_hash`?"), "\(rendered)")
        #expect(rendered.contains { $0.hasPrefix("policies/p.yaml:3:15: error: `clients`:") }, "\(rendered)")
        #expect(rendered.contains("policies/p.yaml:4:21: error: `upstream_proxy` must be `http://HOST:PORT` (a parent proxy spoken to in plain HTTP, then CONNECT)"), "\(rendered)")
        #expect(result.snapshot == nil)
    }

    @Test func anIdentityWithABadHashIsReportedOnceNotAgainWhereAPolicyNamesIt() throws {
        let tree = try ConfigTree(main: Self.main("    billing:\n      password_hash: \"$pbkdf2-sha256$i=9$xx$yy\"\n"), policies: ["p.yaml": """
            hosts:
              - match: api.example.com
                clients: [billing]
            """])
        let rendered = tree.rendered(tree.loader().load().errors)
        #expect(rendered == ["pinproxy.yaml:5:22: error: identity `billing`: `password_hash` has 9 iterations; between 10000 and 10000000 are accepted"])
    }

    @Test func hashIsNeverEchoedInAnError() throws {
        let secretish = "$pbkdf2-sha256$i=10000$QUFBQUFBQUFBQUE=$c2hvcnQ="
        let tree = try ConfigTree(main: Self.main("    billing:\n      password_hash: \"\(secretish)\"\n"), policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(result.errors.count == 1)
        #expect(!result.errors.contains { $0.description.contains("c2hvcnQ") })
    }
}
