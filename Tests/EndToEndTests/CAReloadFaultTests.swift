import Foundation
import PinproxyTestSupport
import Testing

/// The interception CA's key going away under a running proxy, then a reload
/// (docs/contract.md §3 "Reload", §14): the reload fails and says why (the next
/// start would fail too), the failure is logged once and counted, and the CA
/// held in memory keeps minting, so the next request — for a host that needs
/// a new certificate — is served.
@Suite("CA key faults at a reload", .blockingWaits, .serialized)
struct CAReloadFaultTests {
    @Test(arguments: ["removed", "unreadable"])
    func aReloadAfterTheCAKeyBecameUnreadableFailsAndServingGoesOn(fault: String) throws {
        let dir = try TemporaryDirectory("pinproxy-ca-fault")
        let pki = try TestPKI.make(in: dir, names: ["faults.test", "other.faults.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: "faults.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
              - match: "other.faults.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        #expect(try Curl.run("https://faults.test/ok", proxy: proxy, directory: dir).status == 200)

        let key = dir.file("state/ca-key.pem")
        try FileManager.default.moveItem(atPath: key, toPath: key + ".moved")
        if fault == "unreadable" {
            // Root reads any file whatever its mode: a directory in the key's
            // place is unreadable as a key for root too (mode 0700 passes the
            // group/other check, so only the read fails).
            try FileManager.default.createDirectory(atPath: key, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }

        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(reload.status == 422, "\(reload.body)")
        let reason = fault == "removed" ? "is missing while" : "cannot be read"
        #expect(reload.body.contains(reason), "\(reload.body)")
        #expect(pollUntilBlocking { proxy.log.split(separator: "\n").contains { $0.contains(reason) } })
        let logged = proxy.log.split(separator: "\n").filter { $0.contains(reason) }
        #expect(logged.count == 1, "logged once: \(logged)")
        let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect(metrics.value("pinproxy_policy_reloads_total", ["result": "failure"]) == 1)

        // A host seen for the first time needs a new leaf: the CA in memory signs it.
        let next = try Curl.run("https://other.faults.test/ok", proxy: proxy, directory: dir)
        #expect(next.status == 200, "\(next.stderr)")
        #expect(next.body == "ok")
        #expect(try Curl.run("https://faults.test/ok", proxy: proxy, directory: dir).status == 200)
    }
}
