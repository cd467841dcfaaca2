import Foundation
import PinproxyPolicy
import Testing

/// Every broken configuration of docs/contract.md §3 is reported with its exact
/// message, at the key (unknown keys) or at the value (bad values).
struct BrokenConfigTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var main: String = "policies: policies\n"
        var policy: String
        var environment: [String: String] = [:]
        var expected: [String]
        var testDescription: String { name }
    }

    static let mainWithSession = """
        policies: policies
        spotify:
          sessions:
            app:
              client_id: abc
              client_secret: ${SECRET}
        """

    static let cases: [Case] = [
        Case(name: "unknown key with suggestion", policy: """
            hosts:
              - match: a.example.com
                acton: deny
            """, expected: ["policies/p.yaml:3:5: error: unknown key `acton` in `hosts[]`; did you mean `action`?"]),
        Case(name: "unknown key in the main file", main: "policies: policies\nlisen: 127.0.0.1:8080\n", policy: "hosts: []\n",
             expected: ["pinproxy.yaml:2:1: error: unknown key `lisen`; did you mean `listen`?"]),
        Case(name: "negative concurrency", main: "policies: policies\nconcurrency: -2\n", policy: "hosts: []\n",
             expected: ["pinproxy.yaml:2:14: error: `concurrency` must be a whole number ≥ 0, not `-2`"]),
        Case(name: "unknown upstream_protocol", policy: """
            hosts:
              - match: a.example.com
                upstream_protocol: http2
            """, expected: ["policies/p.yaml:3:24: error: `upstream_protocol` must be one of `auto`, `http1`, `h2`, not `http2`"]),
        Case(name: "http2 not a boolean", main: "policies: policies\nhttp2: maybe\n", policy: "hosts: []\n",
             expected: ["pinproxy.yaml:2:8: error: `http2` must be true or false, not `maybe`"]),
        Case(name: "wrong type: scalar for integer", policy: """
            hosts:
              - match: a.example.com
                retries: lots
            """, expected: ["policies/p.yaml:3:14: error: `retries` must be a whole number ≥ 0, not `lots`"]),
        Case(name: "wrong type: list for mapping", policy: """
            hosts:
              - match: a.example.com
                tls: [1.2]
            """, expected: ["policies/p.yaml:3:10: error: `tls` must be a mapping, not a list"]),
        Case(name: "bad duration", policy: """
            hosts:
              - match: a.example.com
                connect_timeout: 5 seconds
            """, expected: ["policies/p.yaml:3:22: error: `connect_timeout` must be a duration such as 250ms, 10s, 5m, 1h or 30d, not `5 seconds`"]),
        Case(name: "bad date", policy: """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256:
                    - pin: "\(Fixture.pin(1))"
                      not_after: 2027-02-30
                    - pin: "\(Fixture.pin(2))"
            """, expected: ["policies/p.yaml:6:22: error: `not_after` must be a date (2026-08-20) or an RFC 3339 date-time (2026-08-20T12:00:00Z), not `2027-02-30`"]),
        Case(name: "transition window ends before it starts", policy: """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
                  transition:
                    from: 2026-12-20
                    until: 2026-12-01
            """, expected: ["policies/p.yaml:7:16: error: window ends before it starts: `until` 2026-12-01T23:59:59Z is before `from` 2026-12-20T00:00:00Z"]),
        Case(name: "pin window ends before it starts", policy: """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256:
                    - pin: "\(Fixture.pin(1))"
                      not_before: 2027-03-01
                      not_after: 2027-02-01
                    - pin: "\(Fixture.pin(2))"
            """, expected: ["policies/p.yaml:7:22: error: window ends before it starts: `not_after` 2027-02-01T23:59:59Z is before `not_before` 2027-03-01T00:00:00Z"]),
        Case(name: "pin not 32 bytes of base64", policy: """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256:
                    - pin: "sha256/AAAA"
                    - pin: "\(Fixture.pin(2))"
            """, expected: ["policies/p.yaml:5:16: error: pin `sha256/AAAA` is not 32 bytes of base64 (a SHA-256, optionally `sha256/`-prefixed)"]),
        Case(name: "unknown TLS version", policy: """
            hosts:
              - match: a.example.com
                tls:
                  min_version: "1.4"
            """, expected: ["policies/p.yaml:4:20: error: unknown TLS version `1.4` for `min_version` (expected \"1.0\", \"1.1\", \"1.2\" or \"1.3\")"]),
        Case(name: "legacy TLS without allow_legacy_tls", policy: """
            hosts:
              - match: a.example.com
                tls:
                  min_version: "1.0"
            """, expected: ["policies/p.yaml:4:20: error: TLS 1.0 is legacy: set `allow_legacy_tls: true` to allow it"]),
        Case(name: "cipher string OpenSSL rejects", policy: """
            hosts:
              - match: a.example.com
                tls:
                  ciphers: "ECDHE+AESGCM:NOPE"
            """, expected: ["policies/p.yaml:4:16: error: tls.ciphers: cipher string element \"NOPE\" matches no cipher OpenSSL knows (error:0A0000B9:SSL routines::no cipher match)"]),
        Case(name: "unknown TLS 1.3 ciphersuite", policy: """
            hosts:
              - match: a.example.com
                tls:
                  ciphers: "ECDHE+AESGCM"
                  ciphersuites: "TLS_AES_128_GCM_SHA256:tls_aes_256_gcm_sha384"
            """, expected: ["policies/p.yaml:5:21: error: tls.ciphersuites: unknown TLS 1.3 ciphersuite \"tls_aes_256_gcm_sha384\" (did you mean TLS_AES_256_GCM_SHA384?)"]),
        // Messages from a lower layer (OpenSSL, the file system) start with the key they are about.
        Case(name: "trust file that cannot be read", policy: """
            hosts:
              - match: a.example.com
                tls:
                  ca_file: missing.pem
            """, expected: ["policies/p.yaml:4:16: error: tls.ca_file: cannot read policies/missing.pem: no such file"]),
        Case(name: "client certificate and key that cannot be read", policy: """
            hosts:
              - match: a.example.com
                tls:
                  client_cert: cert.pem
                  client_key: key.pem
            """, expected: [
                "policies/p.yaml:4:20: error: tls.client_cert: cannot read policies/cert.pem: no such file",
                "policies/p.yaml:5:19: error: tls.client_key: cannot read policies/key.pem: no such file",
            ]),
        Case(name: "unset ${VAR}", main: mainWithSession, policy: "hosts: []\n",
             expected: ["pinproxy.yaml:6:22: error: environment variable `SECRET` is not set (referenced as `${SECRET}`)"]),
        Case(name: "unknown Spotify session", main: mainWithSession, policy: """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
                auth:
                  spotify: ap
            """, environment: ["SECRET": "s3cret"],
             expected: ["policies/p.yaml:6:16: error: unknown Spotify session `ap`; did you mean `app`?"]),
        Case(name: "duplicate host pattern", policy: """
            hosts:
              - match: a.example.com
                action: deny
              - match: A.Example.com.
                action: tunnel
            """, expected: ["policies/p.yaml:4:12: error: duplicate host pattern `A.Example.com.`: already defined at policies/p.yaml:2:12"]),
        Case(name: "YAML syntax error", policy: """
            hosts:
              - match: a.example.com
                action: [deny
            """, expected: ["policies/p.yaml:4:1: error: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at 3:13)"]),
        Case(name: "websocket neither allow nor deny", policy: """
            hosts:
              - match: a.example.com
                websocket: maybe
            """, expected: ["policies/p.yaml:3:16: error: `websocket` must be one of `allow`, `deny`, not `maybe`"]),
        Case(name: "ports out of range or not numbers", policy: """
            hosts:
              - match: a.example.com
                ports: [443, 0, 65536, https]
            """, expected: [
                "policies/p.yaml:3:18: error: `ports` must list port numbers from 1 to 65535, not `0`",
                "policies/p.yaml:3:21: error: `ports` must list port numbers from 1 to 65535, not `65536`",
                "policies/p.yaml:3:28: error: `ports` must list port numbers from 1 to 65535, not `https`",
            ]),
        Case(name: "ports empty", policy: """
            hosts:
              - match: a.example.com
                ports: []
            """, expected: ["policies/p.yaml:3:12: error: `ports` lists no port: name at least one (1–65535), or write `action: deny` to refuse the host"]),
        Case(name: "ports misspelt", policy: """
            hosts:
              - match: a.example.com
                port: [8443]
            """, expected: ["policies/p.yaml:3:5: error: unknown key `port` in `hosts[]`; did you mean `ports`?"]),
        Case(name: "policies path that does not exist", main: "policies: nowhere\n", policy: "hosts: []\n",
             expected: ["pinproxy.yaml:1:11: error: policies path nowhere does not exist"]),
    ]

    @Test(arguments: cases)
    func reportsExactMessageAndLocation(_ c: Case) throws {
        let tree = try ConfigTree(main: c.main, policies: ["p.yaml": c.policy])
        let result = tree.loader(environment: c.environment).load()
        #expect(tree.rendered(result.errors) == c.expected)
        #expect(result.snapshot == nil)
    }

    @Test func reportsEveryProblemAtOnce() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                acton: deny
                retries: lots
                tls: {min_version: "9.9"}
            """])
        let result = tree.loader().load()
        #expect(result.errors.count == 3)
        #expect(result.errors.map(\.line) == [3, 4, 5])
    }

    @Test func strictTurnsWarningsIntoErrors() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                action: tunnel
                tls: {min_version: "1.1", allow_legacy_tls: true}
            """])
        let result = tree.loader().load()
        #expect(result.snapshot != nil)
        #expect(tree.rendered(result.warnings) == [
            "policies/p.yaml:4:24: warning: TLS 1.1 is below 1.2: the upstream leg may negotiate a legacy protocol",
        ])
        #expect(CheckReport(diagnostics: result.diagnostics).isValid)
        let strict = CheckReport(diagnostics: result.diagnostics, strict: true, relativeTo: tree.root)
        #expect(!strict.isValid)
        #expect(strict.errors.map(\.severity) == [.error])
        #expect(strict.text == """
            policies/p.yaml:4:24: error: TLS 1.1 is below 1.2: the upstream leg may negotiate a legacy protocol
            configuration invalid (1 error, 0 warnings)

            """)
        let relative = CheckReport(diagnostics: result.diagnostics, relativeTo: tree.root)
        #expect(relative.json == """
            {"valid": true, "errors": [], "warnings": [{"file": "policies/p.yaml", "line": 4, "column": 24, \
            "message": "TLS 1.1 is below 1.2: the upstream leg may negotiate a legacy protocol"}]}

            """)
    }

    /// `ports:` (issue 27 item 10): one number or a list, repeats dropped;
    /// absent means the defaults; on a deny policy it is a warning.
    @Test func portsAreReadAndOnADenyPolicyWarn() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: one.example.com
                action: tunnel
                ports: 8443
              - match: two.example.com
                action: tunnel
                ports: [443, 8443, 443]
              - match: none.example.com
                action: tunnel
              - match: denied.example.com
                action: deny
                ports: [443]
            """])
        let result = tree.loader().load()
        let snapshot = try #require(result.snapshot, "\(result.diagnostics)")
        #expect(snapshot.policy(forHost: "one.example.com")?.spec.ports == [8443])
        #expect(snapshot.policy(forHost: "two.example.com")?.spec.ports == [443, 8443])
        let none = try #require(snapshot.policy(forHost: "none.example.com")?.spec)
        #expect(none.ports == nil)
        #expect(none.allowedPorts(for: .connect) == [443] && none.allowedPorts(for: .absoluteForm) == [80, 443])
        #expect(tree.rendered(result.warnings) == [
            "policies/p.yaml:12:5: warning: `ports` has no effect on a policy with `action: deny`: every port of the host is refused",
        ])
    }

    @Test func transitionWindowAlreadyOverWarns() throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                upgrade_to_tls: true
                pins:
                  spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
                  transition: {from: 2026-10-01, until: 2026-10-31}
            """])
        let result = tree.loader().load()
        #expect(tree.rendered(result.diagnostics) == [
            "policies/p.yaml:6:45: warning: transition window of `a.example.com` ended 2026-10-31T23:59:59Z: mismatches are enforced again; remove it",
        ])
    }

    @Test func secretsNeverPrint() {
        let secret = Secret("hunter2")
        #expect("\(secret)" == "<redacted>")
        #expect(String(reflecting: secret) == "Secret(<redacted>)")
        var dumped = ""
        dump(SecretSource.inline(secret), to: &dumped)
        #expect(!dumped.contains("hunter2"))
    }
}
