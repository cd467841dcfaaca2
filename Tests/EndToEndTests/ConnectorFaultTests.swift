import Foundation
import PinproxyTestSupport
import Testing

/// Every way the upstream connector can fail (docs/contract.md §4, §15), on
/// the real binary: the guard refusing the upstream or the parent, the parent
/// refusing (407, 403), closing mid-head or never answering, a TLS handshake
/// that fails or never ends, a pin mismatch. Each is the contract's status and
/// `X-Pinproxy-Error`, exactly one access line, and the process lives on (a
/// debug build traps on a promise left incomplete). The parent is
/// Scripts/faulty_parent.py, which picks its fault by the CONNECT target's port.
@Suite("Connector faults end to end", .blockingWaits, .serialized)
struct ConnectorFaultTests {
    final class Parent: @unchecked Sendable {
        let process: ChildProcess
        let port: Int

        init(directory: TemporaryDirectory) throws {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/faulty_parent.py").path
            process = try ChildProcess("python3", ["-u", script], directory: directory, name: "faulty-parent")
            port = try process.waitForOutput(timeout: 20) { text in
                text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
            }
        }

        deinit { process.stop() }
    }

    /// Asks for `https://host/` and checks the refusal, its one access line, and that pinproxy lives.
    static func expectRefusal(_ host: String, status: Int, code: String, detail: String, proxy: ProxyHarness,
                              dir: TemporaryDirectory) throws {
        let result = try Curl.run("https://\(host)/", proxy: proxy, extra: ["--max-time", "20"], directory: dir)
        #expect(result.connectStatus == 200, "\(host): \(result.stderr)")
        #expect(result.status == status, "\(host): \(result.status) \(result.body) \(result.stderr)")
        #expect(result.pinproxyError == code, "\(host): \(result.body)")
        #expect(result.body.contains(detail), "\(host): \(result.body)")
        let lines = try #require(pollForBlocking(timeout: 10) { () -> [[String: Any]]? in
            let lines = proxy.accessLog.filter { ($0["host"] as? String) == host }
            return lines.isEmpty ? nil : lines
        })
        #expect(lines.count == 1, "\(host): \(lines)")
        #expect(lines.first?["error"] as? String == code, "\(host): \(lines)")
        #expect(proxy.process.isRunning, "\(host): \(proxy.log.suffix(2000))")
    }

    @Test func theGuardRefusingTheUpstreamOrTheParentIs403() throws {
        let dir = try TemporaryDirectory("pinproxy-connector-guard")
        let pki = try TestPKI.make(in: dir, names: ["guarded.test", "guarded-parent.test"])
        // Port 9 (discard) is never dialled: the guard refuses 127.0.0.1 first.
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: guarded.test
                upstream: 127.0.0.1:9
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 2
              - match: guarded-parent.test
                upstream: 127.0.0.1:9
                upstream_proxy: http://127.0.0.1:9
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 2
            """, mainConfig: "network:\n  deny_private: true\n  allow: []\n", directory: dir)
        try Self.expectRefusal("guarded.test", status: 403, code: "ssrf_blocked", detail: "127.0.0.1", proxy: proxy, dir: dir)
        try Self.expectRefusal("guarded-parent.test", status: 403, code: "ssrf_blocked", detail: "parent proxy", proxy: proxy, dir: dir)
    }

    @Test func eachParentAndHandshakeFaultIsItsRefusal() throws {
        let dir = try TemporaryDirectory("pinproxy-connector-faults")
        let names = ["p407.test", "p403.test", "midhead.test", "silent-parent.test", "not-tls.test", "silent-tls.test",
                     "silent-direct.test", "wrongpin.test"]
        let pki = try TestPKI.make(in: dir, names: names)
        let parent = try Parent(directory: dir)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        func viaParent(_ name: String, port: Int) -> String {
            """
              - match: \(name)
                upstream: 127.0.0.1:\(port)
                upstream_proxy: http://127.0.0.1:\(parent.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 0
                connect_timeout: 1s
                handshake_timeout: 1s
            """
        }
        let proxy = try ProxyHarness(policies: """
            hosts:
            \(viaParent("p407.test", port: 1001))
            \(viaParent("p403.test", port: 1002))
            \(viaParent("midhead.test", port: 1003))
            \(viaParent("silent-parent.test", port: 1004))
            \(viaParent("not-tls.test", port: 1005))
            \(viaParent("silent-tls.test", port: 1006))
              - match: silent-direct.test
                upstream: 127.0.0.1:\(parent.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 0
                handshake_timeout: 1s
              - match: wrongpin.test
                upstream: 127.0.0.1:\(server.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 0
                pins: { spki_sha256: [{pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}, {pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}] }
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)

        try Self.expectRefusal("p407.test", status: 502, code: "connect_failed", detail: "refused CONNECT 127.0.0.1:1001: 407", proxy: proxy, dir: dir)
        try Self.expectRefusal("p403.test", status: 502, code: "connect_failed", detail: "refused CONNECT 127.0.0.1:1002: 403", proxy: proxy, dir: dir)
        try Self.expectRefusal("midhead.test", status: 502, code: "connect_failed", detail: "closed the connection before answering", proxy: proxy, dir: dir)
        try Self.expectRefusal("silent-parent.test", status: 504, code: "upstream_timeout", detail: "did not answer CONNECT 127.0.0.1:1004 within 1 s",
                               proxy: proxy, dir: dir)
        try Self.expectRefusal("not-tls.test", status: 502, code: "tls_handshake", detail: "upstream", proxy: proxy, dir: dir)
        try Self.expectRefusal("silent-tls.test", status: 504, code: "upstream_timeout", detail: "TLS handshake with silent-tls.test took longer than 1 s",
                               proxy: proxy, dir: dir)
        try Self.expectRefusal("silent-direct.test", status: 504, code: "upstream_timeout", detail: "TLS handshake with silent-direct.test took longer than 1 s",
                               proxy: proxy, dir: dir)
        try Self.expectRefusal("wrongpin.test", status: 502, code: "pin_mismatch", detail: "no active pin matches", proxy: proxy, dir: dir)
        // Each parent fault reached the parent once: no retry behind the refusal (retries: 0).
        for port in 1001...1006 {
            #expect(parent.process.outputText.components(separatedBy: "CONNECT 127.0.0.1:\(port)\n").count - 1 == 1, "\(port): \(parent.process.outputText)")
        }
    }
}
