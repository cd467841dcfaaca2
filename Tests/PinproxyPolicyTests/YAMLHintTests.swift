import Foundation
import PinproxyPolicy
import Testing

/// libyaml's terse errors and a cipher string in the wrong key, said with the
/// likely fix (issue 28 item 18; docs/contract.md §3 "Errors and warnings").
struct YAMLHintTests {
    func errors(main: String = "policies: policies\n", policy: String = "hosts: []\n") throws -> [String] {
        let tree = try ConfigTree(main: main, policies: ["p.yaml": policy])
        return tree.rendered(tree.loader().load().errors)
    }

    /// A key indented deeper than the one above reads as the rest of its value.
    @Test func aKeyIndentedTooDeepNamesTheMappingItContinues() throws {
        let found = try errors(main: "policies: policies\nlisten: 127.0.0.1:8080\n  admin: 127.0.0.1:9090\n")
        #expect(found.count == 1)
        let message = try #require(found.first)
        #expect(message.hasPrefix("pinproxy.yaml:3:8: error: YAML syntax error: mapping values are not allowed in this context"), "\(message)")
        #expect(message.contains("probably indentation: line 3 is indented deeper than `listen:` at "), "\(message)")
        #expect(message.contains("pinproxy.yaml:2:1"), "it points at where the mapping started: \(message)")
    }

    @Test func inAListItemTheKeyAfterTheDashIsNamed() throws {
        let found = try errors(policy: """
            hosts:
              - match: a.example.com
                 action: deny
            """)
        let message = try #require(found.first)
        #expect(message.contains("`match:` at ") && message.contains("p.yaml:2:5"), "\(message)")
    }

    @Test func aValueHoldingColonSpaceIsToldToBeQuoted() throws {
        let found = try errors(policy: """
            hosts:
              - match: a.example.com
                headers: {set: {User-Agent: legacy}}
                note: see: the wiki
            """)
        let message = try #require(found.first)
        #expect(message.contains("put it in quotes"), "\(message)")
    }

    /// `ciphers:` takes the TLS 1.2 cipher string; a TLS 1.3 suite name there points to `ciphersuites`.
    @Test func aTLS13SuiteInCiphersPointsToCiphersuites() throws {
        let found = try errors(policy: """
            hosts:
              - match: a.example.com
                tls:
                  ciphers: "TLS_AES_128_GCM_SHA256"
            """)
        let message = try #require(found.first)
        #expect(message.hasPrefix("policies/p.yaml:4:16: error: tls.ciphers: "), "\(message)")
        #expect(message.contains("`TLS_AES_128_GCM_SHA256` is a TLS 1.3 suite: list TLS 1.3 suites under `tls.ciphersuites`"), "\(message)")
    }
}
