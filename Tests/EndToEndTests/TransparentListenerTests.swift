import Foundation
import PinproxyTestSupport
import Testing

/// Issue 32 items 1–2: apps that ignore HTTPS_PROXY, redirected by nftables
/// to `transparent.listen`, get the same answers as through CONNECT. All of
/// it runs in a network namespace the test creates (`unshare -n`, loopback
/// only), driven by Scripts/transparent_netns.sh; skipped, saying why, where
/// namespaces or nftables are unavailable.
@Suite("Transparent listener", .serialized)
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
        // The access lines of each case, between its marker and the next.
        var sections: [String: [[String: Any]]] = [:]
        var current = ""
        for line in log.split(separator: "\n") {
            if line.hasPrefix("=== ") { current = String(line.dropFirst(4)); continue }
            guard line.contains("\"pinproxy.access\""),
                  let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            sections[current, default: []].append(object)
        }

        // Pin match: the upstream's answer, with the policy's token, through an app with no proxy setting.
        #expect(result("pinned.status") == "200", "\(result("pinned.stderr")) \(log)")
        #expect(result("pinned.body").contains("\"authorization\": \"Bearer transparent-token\""), "\(result("pinned.body"))")
        #expect(sections["curl-pinned"]?.map { $0["mode"] as? String } == ["transparent"], "\(sections)")
        let python = json("python-pinned.json")
        #expect(python["status"] as? Int == 200, "\(python)")
        #expect((python["body"] as? String)?.contains("transparent-token") == true, "\(python)")
        // Pin mismatch: refused inside the intercepted session, as through CONNECT.
        #expect(result("mismatch.status") == "502", "\(result("mismatch.stderr"))")
        #expect(result("mismatch.headers").lowercased().contains("x-pinproxy-error: pin_mismatch"), "\(result("mismatch.headers"))")
        // Plain HTTP from port 80, routed by Host and upgraded to TLS.
        #expect(result("plain.status") == "200", "\(result("plain.stderr")) \(log)")
        #expect(result("plain.body").contains("transparent-token"), "\(result("plain.body"))")
        #expect(sections["curl-plain"]?.map { $0["mode"] as? String } == ["transparent"], "\(sections)")

        // A denied SNI, no SNI (127.0.0.2 has no policy; default deny), a loop:
        // each a TLS alert and exactly one access line with its code.
        #expect(result("denied.exit") != "0" && result("denied.status") == "000", "curl got an answer: \(result("denied.status"))")
        #expect(result("denied.stderr").contains("alert access denied"), "\(result("denied.stderr"))")
        for (name, host, detail) in [("python-denied", "denied.test", "denies denied.test"),
                                     ("no-sni", "127.0.0.2", "no policy matches 127.0.0.2"),
                                     ("loop", "-", "redirect loop")] {
            let answer = json("\(name).json")
            #expect((answer["alert"] as? String)?.uppercased().contains("ACCESS_DENIED") == true, "\(name): \(answer)")
            let lines = sections[name] ?? []
            #expect(lines.count == 1, "\(name): \(lines)")
            #expect(lines.first?["mode"] as? String == "transparent", "\(name): \(lines)")
            #expect(lines.first?["host"] as? String == host || host == "-", "\(name): \(lines)")
            #expect((lines.first?["detail"] as? String)?.contains(detail) == true, "\(name): \(lines)")
        }
        #expect(sections["no-sni"]?.first?["error"] as? String == "host_denied", "\(sections)")
        // pinproxy's own tunnel dial, redirected back to it, is refused as a loop.
        let ownLoop = sections["own-loop"] ?? []
        #expect(ownLoop.contains { ($0["detail"] as? String)?.contains("pinproxy's own upstream connection") == true }, "\(ownLoop)")
    }
}
