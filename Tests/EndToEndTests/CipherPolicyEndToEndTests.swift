import Foundation
import PinproxyTestSupport
import Testing

/// A cipher string that would switch encryption off on the upstream leg is
/// refused by `check` (strict or not), and by a reload while the old policy
/// keeps serving over a real cipher (docs/contract.md §3, "Errors and warnings").
@Suite("cipher strings that switch protection off", .blockingWaits)
struct CipherPolicyEndToEndTests {
    static let nullCiphers = #"tls: { ca_file: CA, max_version: "1.2", ciphers: "ALL:eNULL:@SECLEVEL=0" }"#

    @Test func checkRefusesANullCipherStringAtTheKey() throws {
        let dir = try TemporaryDirectory("pinproxy-null-check")
        try dir.write("etc/pinproxy.yaml", "policies: policies\nca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }\n")
        try dir.write("etc/policies/p.yaml", """
            hosts:
              - match: api.test
                \(Self.nullCiphers.replacingOccurrences(of: "ca_file: CA, ", with: ""))
            """)
        for strict in [[], ["--strict"]] {
            let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")] + strict)
            #expect(check.status == 1, "\(strict): \(check.stdout)\(check.stderr)")
            let output = check.stdout + check.stderr
            #expect(output.contains("p.yaml:3:") && output.contains("error: tls.ciphers:") && output.contains("remove \"@SECLEVEL=0\""),
                    "\(output)")
        }
    }

    @Test func aReloadToANullCipherStringFailsAndTheOldPolicyKeepsServing() throws {
        let dir = try TemporaryDirectory("pinproxy-null-reload")
        let pki = try TestPKI.make(in: dir, names: ["api.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let policy = { (tls: String) in """
            hosts:
              - match: api.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                probe_interval: 0
                \(tls)
            """ }
        let proxy = try ProxyHarness(policies: policy("tls: { ca_file: \(pki.rootCertificate), max_version: \"1.2\" }"),
                                     mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        #expect(try Curl.run("https://api.test/ok", proxy: proxy, directory: dir).status == 200)

        try dir.write("etc/policies/test.yaml", policy(Self.nullCiphers.replacingOccurrences(of: "CA", with: pki.rootCertificate)))
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(reload.status == 422, "\(reload.body)")
        #expect(reload.body.contains("tls.ciphers"), "\(reload.body)")

        let after = try Curl.run("https://api.test/ok", proxy: proxy, directory: dir)
        #expect(after.status == 200)
        let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        #expect(!scrape.body.contains("NULL"), "no NULL cipher was ever negotiated: \(scrape.body.split(separator: "\n").filter { $0.contains("tls_info") })")
    }
}
