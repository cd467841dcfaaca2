import Foundation
import PinproxyTestSupport
import Testing

/// `network.*` follows a reload (docs/contract.md §3 "Reload"): the SSRF guard
/// reads the snapshot serving now, and pooled connections opened before a
/// change of `network` are retired, so an address taken out of
/// `network.allow` is refused at the next request, not at the next start.
@Suite("network settings on reload", .blockingWaits)
struct NetworkReloadTests {
    @Test func anAddressTakenOutOfNetworkAllowIsRefusedAfterAReload() throws {
        let dir = try TemporaryDirectory("pinproxy-network-reload")
        let pki = try TestPKI.make(in: dir, names: ["inside.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: "inside.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "network:\n  deny_private: true\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        let before = try Curl.run("https://inside.test/ok", proxy: proxy, directory: dir)
        #expect(before.status == 200, "\(before.stderr)")

        let main = try String(contentsOfFile: dir.file("etc/pinproxy.yaml"), encoding: .utf8)
        try dir.write("etc/pinproxy.yaml", main.replacingOccurrences(of: "  allow: [127.0.0.0/8]\n", with: "  allow: []\n"))
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(reload.status == 200, "\(reload.body)")

        let after = try Curl.run("https://inside.test/ok", proxy: proxy, directory: dir)
        #expect(after.status == 403, "\(after.body)")
        #expect(after.pinproxyError == "ssrf_blocked")

        // And back: an address added to network.allow is dialled without a restart.
        try dir.write("etc/pinproxy.yaml", main)
        #expect(try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir).status == 200)
        #expect(try Curl.run("https://inside.test/ok", proxy: proxy, directory: dir).status == 200)
    }
}
