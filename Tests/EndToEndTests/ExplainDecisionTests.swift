import Foundation
import PinproxyTestSupport
import Testing

/// `pinproxy explain` makes the proxy's own decision, through the same code
/// (docs/contract.md §13, §15): the SSRF guard on `--connect` and the
/// `clients.allow` ACL on `--client IP`, each checked against a running proxy
/// given the same files.
@Suite("explain decides as the proxy does", .blockingWaits)
struct ExplainDecisionTests {
    @Test func explainConnectRefusesAnAddressTheSSRFGuardRefuses() throws {
        let dir = try TemporaryDirectory("pinproxy-explain-ssrf")
        let pki = try TestPKI.make(in: dir, names: ["api.test"])
        let upstream = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { upstream.stop() }
        let policies = """
            hosts:
              - match: api.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
              - match: tunnel.test
                action: tunnel
                upstream: 127.0.0.1:\(upstream.port)
            """
        // network.deny_private is on by default and network.allow is empty: loopback is refused.
        let proxy = try ProxyHarness(policies: policies, directory: dir)
        let served = try Curl.run("https://api.test/", proxy: proxy, directory: dir)
        #expect(served.status == 403 && served.pinproxyError == "ssrf_blocked", "the proxy refuses: \(served.status) \(served.body)")

        let explained = try PinproxyBinary.run(["explain", "api.test", "--config", dir.file("etc/pinproxy.yaml"), "--connect"])
        #expect(explained.status == 1, "\(explained.stdout)\(explained.stderr)")
        #expect(explained.stdout.contains("verdict:  403 ssrf_blocked"), "\(explained.stdout)")
        #expect(!explained.stdout.contains("would be served"), "\(explained.stdout)")

        // A tunnel: the proxy refuses the CONNECT itself; explain dials as it does.
        let tunnel = try Curl.run("https://tunnel.test/", proxy: proxy, directory: dir)
        #expect(tunnel.connectStatus == 403 && tunnel.pinproxyError == "ssrf_blocked", "\(tunnel.connectStatus) \(tunnel.stderr)")
        let tunnelExplained = try PinproxyBinary.run(["explain", "tunnel.test", "--config", dir.file("etc/pinproxy.yaml"), "--connect"])
        #expect(tunnelExplained.status == 1, "\(tunnelExplained.stdout)\(tunnelExplained.stderr)")
        #expect(tunnelExplained.stdout.contains("verdict:  403 ssrf_blocked"), "\(tunnelExplained.stdout)")
    }

    @Test func explainClientOutsideClientsAllowGetsTheListenersRefusal() throws {
        let dir = try TemporaryDirectory("pinproxy-explain-acl")
        try dir.write("etc/pinproxy.yaml", """
            policies: policies
            ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
            clients:
              allow: [10.0.0.0/8]
            """)
        try dir.write("etc/policies/p.yaml", """
            hosts:
              - match: api.test
                action: tunnel
                clients: [10.2.3.0/24]
            """)
        let config = dir.file("etc/pinproxy.yaml")
        let outside = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "192.168.7.7"])
        #expect(outside.status == 1)
        #expect(outside.stdout.contains("client:   403 client_denied: 192.168.7.7 is not in clients.allow"), "\(outside.stdout)")
        let inside = try PinproxyBinary.run(["explain", "api.test", "--config", config, "--client", "10.2.3.4"])
        #expect(inside.status == 0, "\(inside.stdout)")
        #expect(inside.stdout.contains("client:   10.2.3.4 may use this policy"), "\(inside.stdout)")
    }
}
