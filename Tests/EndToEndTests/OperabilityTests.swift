import Foundation
import PinproxyTestSupport
import Testing

/// What an operator reaches for after a rotation or while scraping (issue 28
/// items 13 and 19): a probe on demand and after a reload, `HEAD /metrics`,
/// the standard `process_*` families.
@Suite("Operability", .blockingWaits)
struct OperabilityTests {
    static func policy(port: Int, pki: TestPKI, pins: [String], interval: String) -> String {
        """
        hosts:
          - match: probe.test
            upstream: 127.0.0.1:\(port)
            tls: { ca_file: \(pki.rootCertificate) }
            probe_interval: \(interval)
            pins:
              spki_sha256: [\(pins.map { "{pin: \"\($0)\"}" }.joined(separator: ", "))]
        """
    }

    static func json(_ body: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    /// `POST /probe?host=H` runs one now and answers its result; with the
    /// schedule off (`probe_interval: 0`) it is the only probe there is.
    @Test func aProbeOnDemandSeesARotationAtOnce() async throws {
        let dir = try TemporaryDirectory("pinproxy-probe-now")
        let pki = try TestPKI.make(in: dir, names: ["probe.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let pins = [try TestPKI.opensslSPKIPin(pki.leafCertificate), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
        let proxy = try ProxyHarness(policies: Self.policy(port: upstream.port, pki: pki, pins: pins, interval: "0s"),
                                     mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        let first = try Curl.run("\(admin)/probe?host=probe.test", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(first.status == 200, "\(first.body)")
        #expect(try Self.json(first.body)["success"] as? Bool == true, "\(first.body)")
        #expect(try Self.json(first.body)["verdict"] as? String == "match")

        let rotated = try pki.makeLeaf(named: "rotated", names: ["probe.test"])
        try upstream.swapCertificate(chainFile: rotated.chain, keyFile: rotated.key)
        let second = try Curl.run("\(admin)/probe?host=probe.test", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(try Self.json(second.body)["error"] as? String == "pin_mismatch", "\(second.body)")
        let scrape = try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir).body)
        #expect(scrape.value("pinproxy_probe_success", ["host": "probe.test"]) == 0, "the gauge follows the probe at once")

        let unknown = try Curl.run("\(admin)/probe?host=other.test", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(unknown.status == 404)
        #expect(try Self.json(unknown.body)["error"] as? String == "no_policy")
        let get = try Curl.run("\(admin)/probe?host=probe.test", proxyURL: nil, caFile: nil, directory: dir)
        #expect(get.status == 405 && get.headers["allow"] == "POST")
    }

    /// A reload that changes a policy probes it again without waiting for the
    /// interval (10 minutes here), so `/policies` and the gauge are current.
    @Test func aReloadThatChangesAPolicyProbesItAgain() async throws {
        let dir = try TemporaryDirectory("pinproxy-probe-reload")
        let pki = try TestPKI.make(in: dir, names: ["probe.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let leaf = try TestPKI.opensslSPKIPin(pki.leafCertificate)
        let proxy = try ProxyHarness(policies: Self.policy(port: upstream.port, pki: pki, pins: [leaf, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="], interval: "10m"),
                                     mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        func probe() throws -> [String: Any]? {
            let hosts = try Self.json(try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir).body)["hosts"] as? [[String: Any]]
            return hosts?.first?["probe"] as? [String: Any]
        }
        #expect(try await pollUntil(timeout: 15, every: 0.2) { try probe()?["success"] as? Bool == true }, "the first probe at start")
        // The upstream rotates; the last probe (at start) still says all is well.
        let rotated = try pki.makeLeaf(named: "rotated", names: ["probe.test"])
        try upstream.swapCertificate(chainFile: rotated.chain, keyFile: rotated.key)
        #expect(try probe()?["success"] as? Bool == true)
        // Any change to the policy (here its backup pin) probes it again, and the probe sees the rotation.
        try dir.write("etc/policies/test.yaml", Self.policy(port: upstream.port, pki: pki, pins: [leaf, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="], interval: "10m"))
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(reload.status == 200, "\(reload.body)")
        let reprobed = try await pollUntil(timeout: 15, every: 0.2) { try probe()?["error"] as? String == "pin_mismatch" }
        #expect(reprobed, "\(String(describing: try? probe()))")
        let scrape = try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir).body)
        #expect(scrape.value("pinproxy_probe_success", ["host": "probe.test"]) == 0)
    }

    /// `HEAD /metrics` is the GET without its body (Prometheus checks and
    /// `curl -I` use it), and the scrape has the standard `process_*` families.
    @Test func headMetricsAndProcessFamilies() throws {
        let proxy = try ProxyHarness(policies: "hosts: []\n")
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        let head = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, extra: ["-I"], directory: proxy.directory)
        #expect(head.status == 200, "\(head.headers)")
        #expect(head.headers["content-type"]?.hasPrefix("text/plain") == true)
        // curl -I writes the head where the body would go: no exposition in it.
        #expect(!head.body.contains("pinproxy_build_info"), "\(head.body)")
        let scrape = try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: proxy.directory).body)
        #expect(scrape.value("process_resident_memory_bytes", [:]) ?? 0 > 1_000_000)
        #expect(scrape.value("process_open_fds", [:]) ?? 0 >= 3)
        #expect(scrape.value("process_max_fds", [:]) ?? 0 >= scrape.value("process_open_fds", [:]) ?? .infinity)
        #expect(scrape.value("process_cpu_seconds_total", [:]) ?? 0 > 0)
        let start = scrape.value("process_start_time_seconds", [:]) ?? 0
        #expect(abs(start - Date().timeIntervalSince1970) < 600, "started moments ago: \(start)")
        let post = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: proxy.directory)
        #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD")
    }
}
