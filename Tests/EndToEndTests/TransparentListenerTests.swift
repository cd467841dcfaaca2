import Foundation
import PinproxyTestSupport
import Testing

/// Issue 32 items 1–2: apps that ignore HTTPS_PROXY, redirected by nftables
/// to `transparent.listen`, get the same answers as through CONNECT. All of
/// it runs in a network namespace the test creates (`unshare -n`, loopback
/// only), driven by Scripts/transparent_netns.sh; skipped, saying why, where
/// namespaces or nftables are unavailable.
@Suite("Transparent listener", .blockingWaits, .serialized)
struct TransparentListenerTests {
    static let scripts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts").path

    /// Why the test cannot run here, or nil.
    static var unavailable: String? {
        guard let probe = try? ChildProcess.runSeparately("/usr/bin/env", ["unshare", "-n", "nft", "list", "ruleset"]) else {
            return "unshare or nft could not be started"
        }
        return probe.status == 0 ? nil : "no network namespace with nftables here (unshare -n nft: \(probe.stderr))"
    }

    @Test func appsThatIgnoreProxiesGetTheSameAnswersAsThroughCONNECT() throws {
        if let why = Self.unavailable {
            print("skipped: \(why)")
            return
        }
        let dir = try TemporaryDirectory("pinproxy-transparent")
        let pki = try TestPKI.make(in: dir, names: ["api.test", "pinbad.test"])
        _ = try dir.write("upstream-chain.pem", try String(contentsOfFile: pki.chainFile, encoding: .utf8))
        _ = try dir.write("upstream-key.pem", try String(contentsOfFile: pki.leafKey, encoding: .utf8))
        let pin = try TestPKI.opensslSPKIPin(pki.leafCertificate)
        _ = try dir.write("policies.yaml", """
            hosts:
              - match: api.test
                action: intercept
                upstream: 127.0.0.3:8443
                upgrade_to_tls: true
                tls: { ca_file: \(pki.rootCertificate) }
                pins: { spki_sha256: [{pin: "\(pin)"}] }
                headers: { set: { Authorization: "Bearer transparent-token" } }
                probe_interval: 0
              - match: pinbad.test
                action: intercept
                upstream: 127.0.0.3:8443
                tls: { ca_file: \(pki.rootCertificate) }
                pins: { spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}] }
                probe_interval: 0
              - match: denied.test
                action: deny
              - match: loop.test
                action: tunnel
                upstream: 127.0.0.2:443

            """)
        _ = try dir.write("pinproxy.yaml", """
            listen: 127.0.0.1:18080
            admin: { listen: 127.0.0.1:19090 }
            transparent: { listen: 127.0.0.1:15001 }
            ca: { cert: state/ca.pem, key: state/ca-key.pem }
            policies: policies.yaml
            network: { allow: [127.0.0.0/8] }
            log: { level: info, format: json }

            """)
        let run = try ChildProcess.runSeparately(
            "/usr/bin/env", ["unshare", "-n", "bash", "\(Self.scripts)/transparent_netns.sh", dir.path, PinproxyBinary.path, Self.scripts])
        let log = (try? String(contentsOfFile: dir.file("pinproxy.log"), encoding: .utf8)) ?? ""
        try #require(run.status == 0, "\(run.stderr)\n\(log)")
        func result(_ name: String) -> String {
            ((try? String(contentsOfFile: dir.file("results/\(name)"), encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func json(_ name: String) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(result(name).utf8)) as? [String: Any]) ?? [:]
        }
        let lines: [[String: Any]] = log.split(separator: "\n").compactMap { line in
            guard line.contains("\"pinproxy.access\"") else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
        func linesWhere(_ predicate: ([String: Any]) -> Bool) -> [[String: Any]] { lines.filter(predicate) }
        func text(_ line: [String: Any], _ key: String) -> String { line[key] as? String ?? "" }
        #expect(lines.allSatisfy { text($0, "mode") == "transparent" }, "\(lines)")

        // Pin match: the upstream's answer, with the policy's token, through apps with no proxy setting.
        #expect(result("pinned.status") == "200", "\(result("pinned.stderr")) \(log)")
        #expect(result("pinned.body").contains("\"authorization\": \"Bearer transparent-token\""), "\(result("pinned.body"))")
        let python = json("python-pinned.json")
        #expect(python["status"] as? Int == 200, "\(python)")
        #expect((python["body"] as? String)?.contains("transparent-token") == true, "\(python)")
        // Plain HTTP from port 80, routed by Host and upgraded to TLS.
        #expect(result("plain.status") == "200", "\(result("plain.stderr")) \(log)")
        #expect(result("plain.body").contains("transparent-token"), "\(result("plain.body"))")
        let served = linesWhere { text($0, "host") == "api.test" && text($0, "method") == "GET" }
        #expect(served.count == 3 && served.allSatisfy { $0["status"] as? Int == 200 && text($0, "pin") == "match" }, "\(served)")
        // Pin mismatch: refused inside the intercepted session, as through CONNECT.
        #expect(result("mismatch.status") == "502", "\(result("mismatch.stderr"))")
        #expect(result("mismatch.headers").lowercased().contains("x-pinproxy-error: pin_mismatch"), "\(result("mismatch.headers"))")
        #expect(linesWhere { text($0, "host") == "pinbad.test" }.map { text($0, "error") } == ["pin_mismatch"], "\(lines)")

        // A denied SNI (curl and Python), no SNI (127.0.0.2 has no policy;
        // default deny), a loop: each a TLS alert and one access line.
        #expect(result("denied.status") == "000" && result("denied.stderr").contains("alert access denied"), "\(result("denied.stderr"))")
        for (name, expected) in [("python-denied", "ACCESS_DENIED"), ("no-sni", "ACCESS_DENIED"), ("loop", "ACCESS_DENIED")] {
            let answer = json("\(name).json")
            #expect((answer["alert"] as? String)?.uppercased().contains(expected) == true, "\(name): \(answer)")
        }
        let denied = linesWhere { text($0, "host") == "denied.test" }
        #expect(denied.count == 2 && denied.allSatisfy { text($0, "error") == "host_denied" && $0["status"] as? Int == 403 }, "\(denied)")
        let noSNI = linesWhere { text($0, "host") == "127.0.0.2" && !text($0, "detail").hasPrefix("redirect loop") }
        #expect(noSNI.count == 1 && noSNI.first.map { text($0, "error") } == "host_denied", "\(noSNI)")
        #expect(noSNI.first.map { text($0, "detail") }?.contains("no policy matches 127.0.0.2") == true, "\(noSNI)")
        let loop = linesWhere { text($0, "detail").contains("is the transparent listener itself") }
        #expect(loop.count == 1 && loop.first.map { text($0, "error") } == "bad_request", "\(lines)")
        // pinproxy's own tunnel dial, redirected back to it, is refused as a
        // loop (the app behind the tunnel sees that refusal's alert).
        let ownLoop = linesWhere { text($0, "detail").contains("pinproxy's own upstream connection") }
        #expect(ownLoop.count == 1, "\(lines)")
        #expect((json("own-loop.json")["alert"] as? String)?.uppercased().contains("ACCESS_DENIED") == true, "\(result("own-loop.json"))")
        #expect(!lines.contains { text($0, "detail").contains("header_timeout") }, "\(lines)")
    }
}
