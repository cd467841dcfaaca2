import Foundation
import PinproxyPolicy
import Testing

/// `tls.ciphers` cannot switch encryption or authentication off upstream
/// (docs/contract.md §3, "Errors and warnings"): OpenSSL expands the string
/// and `check`, `run` and a reload refuse a `@SECLEVEL` below the default,
/// NULL and anonymous ciphers, and a list that leaves no cipher, at the key.
struct CipherPolicyTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var tls: String
        var expected: String
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "NULL ciphers behind a lowered security level",
             tls: #"{ max_version: "1.2", ciphers: "ALL:eNULL:@SECLEVEL=0" }"#,
             expected: #"policies/p.yaml:3:41: error: tls.ciphers: cipher string "ALL:eNULL:@SECLEVEL=0" lowers the security level to 0, below OpenSSL's default"#),
        Case(name: "NULL alone leaves nothing usable",
             tls: #"{ ciphers: "NULL" }"#,
             expected: #"policies/p.yaml:3:21: error: tls.ciphers: cipher string "NULL" leaves no cipher usable for TLS 1.2 and below"#),
        Case(name: "anonymous ciphers under legacy TLS (security level 0)",
             tls: #"{ min_version: "1.0", allow_legacy_tls: true, ciphers: "ALL" }"#,
             expected: #"policies/p.yaml:3:65: error: tls.ciphers: cipher string "ALL" admits "#),
        Case(name: "NULL ciphers under legacy TLS",
             tls: #"{ min_version: "1.0", allow_legacy_tls: true, ciphers: "ECDHE+AESGCM:eNULL" }"#,
             expected: #"policies/p.yaml:3:65: error: tls.ciphers: cipher string "ECDHE+AESGCM:eNULL" admits "#),
        Case(name: "a list that removes everything it added",
             tls: #"{ ciphers: "PSK" }"#,
             expected: #"policies/p.yaml:3:21: error: tls.ciphers: cipher string "PSK" leaves no cipher usable"#),
    ]

    @Test(arguments: cases)
    func refusedAtTheKeyWithTheFix(_ c: Case) throws {
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                tls: \(c.tls)
            """])
        let result = tree.loader().load()
        let rendered = tree.rendered(result.errors)
        #expect(rendered.count == 1 && rendered[0].hasPrefix(c.expected), "\(rendered)")
        #expect(result.snapshot == nil)
    }

    @Test func theShippedStringAndAPlainAEADListPass() throws {
        for ciphers in ["ECDHE+AESGCM:ECDHE+CHACHA20", "ECDHE-RSA-AES128-GCM-SHA256", "ALL"] {
            let tree = try ConfigTree(policies: ["p.yaml": """
                hosts:
                  - match: a.example.com
                    tls: { ciphers: "\(ciphers)" }
                """])
            let result = tree.loader().load()
            #expect(result.errors.isEmpty, "\(ciphers): \(tree.rendered(result.errors))")
        }
    }
}
