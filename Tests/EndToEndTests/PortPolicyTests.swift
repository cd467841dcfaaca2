import Foundation
import PinproxyTestSupport
import Testing

/// A policy's `ports:` (docs/contract.md §3, issue 27 item 10) through the
/// real binary and curl: without it a CONNECT reaches only 443 and an
/// http:// request 80 or 443; other ports get 403 `port_denied`, counted in
/// `denied_total`. The port the client asked for is checked, whatever
/// `upstream:` dials.
@Suite("Policy ports", .blockingWaits, .serialized)
struct PortPolicyTests {
    static func setup() async throws -> Scenario {
        try await Scenario("pinproxy-ports", names: ["api.test", "alt.test", "tunnel.test"], hosts: [
            .intercept("api.test", "upgrade_to_tls: true"),
            .intercept("alt.test", "ports: [8443]", "upgrade_to_tls: true"),
            .tunnel("tunnel.test"),
        ])
    }

    @Test func theDefaultPortsAre443ForCONNECTAnd80Or443ForHTTP() async throws {
        let s = try await Self.setup()
        let served = try s.curl("https://api.test/")
        #expect(served.status == 200, "\(served.stderr) \(served.body)")
        #expect(try s.curl("http://api.test/").status == 200)
        // CONNECT api.test:8443 and tunnel.test:8443: refused before any dial.
        let before = s.upstream.connections.withLockedValue { $0 }
        for url in ["https://api.test:8443/", "https://tunnel.test:8443/", "https://api.test:80/"] {
            let refused = try s.curl(url)
            #expect(refused.connectStatus == 403, "\(url): \(refused.stderr)")
            #expect(refused.pinproxyError == "port_denied", "\(url)")
        }
        // An absolute-form request to a port outside 80 and 443.
        let plain = try s.curl("http://api.test:8080/")
        #expect(plain.status == 403)
        #expect(plain.pinproxyError == "port_denied")
        #expect(plain.body.contains("does not allow port 8080 of api.test"), "\(plain.body)")
        #expect(s.upstream.connections.withLockedValue { $0 } == before, "a refused port is never dialled")
        // The tunnel at its default port still splices.
        #expect(try s.curl("https://tunnel.test/", caFile: s.pki.rootCertificate).status == 200)

        let lines = s.proxy.waitForAccessLog(count: 7)
        #expect(lines.filter { $0["error"] as? String == "port_denied" }.count == 4, "\(lines)")
        let scrape = try Curl.run("http://127.0.0.1:\(try s.proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: s.dir)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect(metrics.matching("pinproxy_denied_total", ["reason": "port_denied"]).map(\.value).reduce(0, +) == 4)
    }

    @Test func portsReplacesTheDefaultsForBothForms() async throws {
        let s = try await Self.setup()
        // `upstream:` dials the test server; the port asked for is what `ports:` judges.
        let served = try s.curl("https://alt.test:8443/")
        #expect(served.status == 200, "\(served.stderr) \(served.body)")
        #expect(try s.curl("http://alt.test:8443/").status == 200)
        for url in ["https://alt.test/", "http://alt.test/"] {
            let refused = try s.curl(url)
            #expect(refused.connectStatus == 403 || refused.status == 403, "\(url)")
            #expect(refused.pinproxyError == "port_denied", "\(url)")
        }
    }
}
