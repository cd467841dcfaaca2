import Foundation
import PinproxyTestSupport
import Testing

/// A policy's `ports:` (docs/contract.md §3, issue 27 item 10) through the
/// in-process proxy and curl: without it a CONNECT reaches only 443 and an
/// http:// request 80 or 443; other ports get 403 `port_denied`, counted in
/// `denied_total`. The port the client asked for is checked, whatever
/// `upstream:` dials. `api.test` and `tunnel.test` name no upstream: the
/// injected dialer sends their own names to the test server.
@Suite("Policy ports", .blockingWaits)
struct PortPolicyTests {
    static func policies(rootCertificate: String, upstreamPort: Int) -> String {
        """
        hosts:
          - match: api.test
            action: intercept
            tls: { ca_file: \(rootCertificate) }
            probe_interval: 0
            upgrade_to_tls: true
          - match: alt.test
            action: intercept
            upstream: 127.0.0.1:\(upstreamPort)
            tls: { ca_file: \(rootCertificate) }
            probe_interval: 0
            ports: [8443]
            upgrade_to_tls: true
          - match: tunnel.test
            action: tunnel
        """
    }

    /// A PKI, a TLS upstream and a proxy of the test's own, the proxy stopped when `body` ends.
    private func withProxy(_ body: (TestPKI, TestUpstream, InProcessProxy) async throws -> Void) async throws {
        let dir = try TemporaryDirectory("pinproxy-ports")
        let pki = try TestPKI.make(in: dir, names: ["api.test", "alt.test", "tunnel.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        defer { upstream.stop() }
        try await InProcessProxy.run(policies: Self.policies(rootCertificate: pki.rootCertificate, upstreamPort: upstream.port), directory: dir,
                                     upstreams: .loopback(["api.test": upstream.port, "tunnel.test": upstream.port])) { proxy in
            try await body(pki, upstream, proxy)
        }
    }

    @Test func theDefaultPortsAre443ForCONNECTAnd80Or443ForHTTP() async throws {
        try await withProxy { pki, upstream, proxy in
            let served = try proxy.curl("https://api.test/")
            #expect(served.status == 200, "\(served.stderr) \(served.body)")
            #expect(try proxy.curl("http://api.test/").status == 200)
            // CONNECT api.test:8443 and tunnel.test:8443: refused before any dial.
            let before = upstream.connections.withLockedValue { $0 }
            for url in ["https://api.test:8443/", "https://tunnel.test:8443/", "https://api.test:80/"] {
                let refused = try proxy.curl(url)
                #expect(refused.connectStatus == 403, "\(url): \(refused.stderr)")
                #expect(refused.pinproxyError == "port_denied", "\(url)")
            }
            // An absolute-form request to a port outside 80 and 443.
            let plain = try proxy.curl("http://api.test:8080/")
            #expect(plain.status == 403)
            #expect(plain.pinproxyError == "port_denied")
            #expect(plain.body.contains("does not allow port 8080 of api.test"), "\(plain.body)")
            #expect(upstream.connections.withLockedValue { $0 } == before, "a refused port is never dialled")
            // The tunnel at its default port still splices.
            #expect(try proxy.curl("https://tunnel.test/", caFile: pki.rootCertificate).status == 200)

            let lines = await proxy.waitForAccessLog(count: 7)
            #expect(lines.filter { $0["error"] == "port_denied" }.count == 4, "\(lines)")
            let metrics = try proxy.scrape()
            #expect(metrics.matching("pinproxy_denied_total", ["reason": "port_denied"]).map(\.value).reduce(0, +) == 4)
        }
    }

    @Test func portsReplacesTheDefaultsForBothForms() async throws {
        try await withProxy { _, _, proxy in
            // `upstream:` dials the test server; the port asked for is what `ports:` judges.
            let served = try proxy.curl("https://alt.test:8443/")
            #expect(served.status == 200, "\(served.stderr) \(served.body)")
            #expect(try proxy.curl("http://alt.test:8443/").status == 200)
            for url in ["https://alt.test/", "http://alt.test/"] {
                let refused = try proxy.curl(url)
                #expect(refused.connectStatus == 403 || refused.status == 403, "\(url)")
                #expect(refused.pinproxyError == "port_denied", "\(url)")
            }
        }
    }
}
