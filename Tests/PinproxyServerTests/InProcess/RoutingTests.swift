import Foundation
import PinproxyTestSupport
import Testing

/// The policy's action, the TLS floor, the SSRF guard, the client ACL, the
/// Host check and upstream fallback, as a legacy app sees them through curl,
/// in front of the in-process proxy. Each test has upstreams and a proxy of
/// its own, so the suite runs side by side.
@Suite("Routing, TLS policy and refusals", .blockingWaits)
struct RoutingTests {
    /// The suite's PKI, made once.
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI

        init() throws {
            dir = try TemporaryDirectory("pinproxy-routing")
            pki = try TestPKI.make(in: dir, names: [
                "tls13.test", "tls13-chacha.test", "floor.test", "cipher.test", "tunnel.test", "ssrf.test",
                "ssrf-tunnel.test", "fallback.test", "api.test", "pool.test",
            ])
        }
    }

    /// The `s_server`s a test may ask for; one it did not ask for is not
    /// started, and the hosts it would serve point at a port that refuses.
    enum Server: Sendable {
        case modern, tls12Only, chachaOnly

        var arguments: [String] {
            switch self {
            case .modern: return ["-www"]
            case .tls12Only: return ["-www", "-tls1_2"]
            case .chachaOnly: return ["-www", "-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"]
            }
        }
    }

    /// One test's upstreams, its own: `s_server` serves one connection at a
    /// time, and the pool test counts the connections `upstream` accepted.
    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let servers: [OpenSSLServer]
        let upstream: TestUpstream
        let refusing: RefusingPort
        let policies: String

        init(_ setup: Setup, servers wanted: [Server]) async throws {
            dir = setup.dir
            pki = setup.pki
            upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
            refusing = try RefusingPort()
            var started: [OpenSSLServer] = []
            var ports: [Server: Int] = [:]
            for server in wanted {
                let process = try OpenSSLServer(directory: setup.dir, certificate: setup.pki.leafCertificate, key: setup.pki.leafKey,
                                                chain: setup.pki.intermediateCertificate, arguments: server.arguments)
                started.append(process)
                ports[server] = process.port
            }
            servers = started
            let (modern, tls12Only, chachaOnly) = (ports[.modern] ?? refusing.port, ports[.tls12Only] ?? refusing.port,
                                                   ports[.chachaOnly] ?? refusing.port)
            let closedPort = refusing.port
            let ca = pki.rootCertificate
            policies = """
            hosts:
              - match: tls13.test
                action: intercept
                upstream: 127.0.0.1:\(modern)
                tls: { min_version: "1.3", ca_file: \(ca) }
              - match: tls13-chacha.test
                action: intercept
                upstream: 127.0.0.1:\(modern)
                tls: { min_version: "1.3", ciphersuites: TLS_CHACHA20_POLY1305_SHA256, ca_file: \(ca) }
              - match: floor.test
                action: intercept
                upstream: 127.0.0.1:\(tls12Only)
                tls: { min_version: "1.3", ca_file: \(ca) }
              - match: cipher.test
                action: intercept
                upstream: 127.0.0.1:\(chachaOnly)
                tls: { max_version: "1.2", ciphers: "ECDHE-ECDSA-AES128-GCM-SHA256", ca_file: \(ca) }
              - match: denied.test
                action: deny
              - match: tunnel.test
                action: tunnel
                upstream: 127.0.0.1:\(modern)
              - match: ssrf.test
                action: intercept
                upstream: 10.255.255.1:443
                tls: { ca_file: \(ca) }
              - match: ssrf-tunnel.test
                action: tunnel
                upstream: 192.168.255.1:443
              - match: fallback.test
                action: intercept
                upstream: [127.0.0.1:\(closedPort), 127.0.0.1:\(upstream.port)]
                retries: 0
                tls: { ca_file: \(ca) }
              - match: pool.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(ca) }
                probe_interval: 0
              - match: api.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(ca) }
                headers:
                  set: { User-Agent: "legacy-app via pinproxy" }
                  remove: [X-Debug]
            """
        }

        func stop() {
            for server in servers { server.stop() }
            upstream.stop()
        }
    }

    static let setup = Task.blockingSetup { try Setup() }

    /// Runs `body` with upstreams and a proxy of its own, all stopped when it ends.
    /// Loopback is allowed for the test upstreams; 10/8 and 192.168/16 are not.
    private func withProxy(servers: [Server] = [], _ body: (Stack, InProcessProxy) async throws -> Void) async throws {
        let stack = try await Stack(try await Self.setup.value, servers: servers)
        defer { stack.stop() }
        try await InProcessProxy.run(policies: stack.policies, mainConfig: "network:\n  allow: [127.0.0.0/8]\n") { proxy in
            try await body(stack, proxy)
        }
    }

    @Test func theNegotiatedTLSIsWhatThePolicyAsked() async throws {
        try await withProxy(servers: [.modern]) { _, proxy in
            let modern = try proxy.curl("https://tls13.test/")
            #expect(modern.status == 200)
            #expect(modern.body.contains("Protocol  : TLSv1.3"))
            let chacha = try proxy.curl("https://tls13-chacha.test/")
            #expect(chacha.status == 200)
            #expect(chacha.body.contains("Cipher    : TLS_CHACHA20_POLY1305_SHA256"), "\(chacha.body.prefix(400))")
        }
    }

    @Test func aTLS13FloorAgainstATLS12OnlyUpstreamIsRefused() async throws {
        try await withProxy(servers: [.tls12Only]) { _, proxy in
            let result = try proxy.curl("https://floor.test/")
            #expect(result.status == 502)
            #expect(result.pinproxyError == "tls_version")
        }
    }

    @Test func disjointCiphersAreRefused() async throws {
        try await withProxy(servers: [.chachaOnly]) { _, proxy in
            let result = try proxy.curl("https://cipher.test/")
            #expect(result.status == 502)
            #expect(result.pinproxyError == "tls_cipher")
        }
    }

    @Test func aDeniedHostAndAHostWithNoPolicyAreRefusedAtCONNECT() async throws {
        try await withProxy { _, proxy in
            for (host, detail) in [("denied.test", "policy denied.test"), ("nowhere.test", "no policy matches nowhere.test and default_action is deny")] {
                let client = try RawClient(port: proxy.port)
                client.send("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n")
                let (head, body) = client.readResponse()
                #expect(head.hasPrefix("HTTP/1.1 403 Forbidden"), "\(head)")
                #expect(head.contains("X-Pinproxy-Error: host_denied"))
                let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
                #expect(json["host"] as? String == host)
                #expect((json["detail"] as? String)?.contains(detail) == true, "\(body)")
            }
            let viaCurl = try proxy.curl("https://denied.test/")
            #expect(viaCurl.connectStatus == 403)
        }
    }

    @Test func aTunnelIsABlindSpliceAndTheAppSeesTheUpstreamsOwnCertificate() async throws {
        try await withProxy(servers: [.modern]) { s, proxy in
            // Trusting only the upstream's root works; trusting only pinproxy's CA does not.
            let direct = try proxy.curl("https://tunnel.test/", caFile: s.pki.rootCertificate)
            #expect(direct.status == 200, "\(direct.stderr)")
            #expect(direct.body.contains("s_server"))
            let intercepted = try proxy.curl("https://tunnel.test/")
            #expect(intercepted.exitCode == 60, "curl must reject the upstream's chain when it trusts only pinproxy's CA: \(intercepted.stderr)")
        }
    }

    @Test func aPrivateUpstreamAddressIsRefusedAsSSRF() async throws {
        try await withProxy { _, proxy in
            // Intercepted: the guard runs at dial time, so the 403 comes inside the session.
            let inside = try proxy.curl("https://ssrf.test/")
            #expect(inside.status == 403)
            #expect(inside.pinproxyError == "ssrf_blocked")
            #expect(inside.body.contains("10.255.255.1 (private (RFC 1918))"), "\(inside.body)")
            // Tunnelled: the dial happens before the 200, so CONNECT itself is refused.
            let tunnel = try proxy.curl("https://ssrf-tunnel.test/")
            #expect(tunnel.connectStatus == 403)
        }
    }

    @Test func aHostHeaderOtherThanTheCONNECTHostGets421() async throws {
        try await withProxy { _, proxy in
            let result = try proxy.curl("https://api.test/echo", ["-H", "Host: evil.example"])
            #expect(result.status == 421)
            #expect(result.pinproxyError == "host_mismatch")
        }
    }

    @Test func theFirstUpstreamRefusingConnectionsFallsBackToTheSecond() async throws {
        try await withProxy { _, proxy in
            let result = try proxy.curl("https://fallback.test/echo")
            #expect(result.status == 200, "\(result.body) \(result.stderr)")
            #expect(result.body.contains("\"uri\": \"/echo\""))
        }
    }

    @Test func headerRulesHopByHopAndViaAreApplied() async throws {
        try await withProxy { _, proxy in
            // HTTP/1.1: a `Connection` header naming others exists only there (curl drops it on h2).
            let result = try proxy.curl("https://api.test/echo?q=secret", [
                "--http1.1", "-H", "X-Debug: 1", "-H", "Connection: keep-alive, X-Drop-Me", "-H", "X-Drop-Me: 1", "-H", "Proxy-Authorization: Basic Zm9v",
            ])
            #expect(result.status == 200)
            let echo = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
            let headers = (echo["headers"] as? [[String]] ?? []).map { ($0[0].lowercased(), $0[1]) }
            let names = Set(headers.map(\.0))
            #expect(headers.contains { $0 == ("user-agent", "legacy-app via pinproxy") })
            #expect(!names.contains("x-debug"))
            #expect(!names.contains("x-drop-me"))
            #expect(!names.contains("proxy-authorization"))
            #expect(!names.contains("connection"))
            #expect(headers.contains { $0 == ("via", "1.1 pinproxy") })
            #expect(echo["uri"] as? String == "/echo?q=secret")
            // The access log keeps the path, never the query; no other line has it either.
            let line = await proxy.waitForAccessLog(count: 1).last { $0["host"] == "api.test" && $0["path"] == "/echo" }
            #expect(line != nil)
            let logged = proxy.recorder.logs.map { "\($0.message) \($0.metadata)" }
            #expect(!logged.contains { $0.contains("q=secret") }, "\(logged)")
        }
    }

    @Test func keepAliveRequestsShareOnePooledUpstreamConnection() async throws {
        try await withProxy { s, proxy in
            let before = s.upstream.connections.withLockedValue { $0 }
            // Three requests on one client connection: idle upstream connections are lent
            // within an event loop (per-worker pools, as in Envoy), so exactly one is opened.
            let next = ["--next", "--proxy", proxy.proxyURL, "--cacert", proxy.caFile]
            let three = try proxy.curl("https://pool.test/echo", next + ["https://pool.test/echo"] + next + ["https://pool.test/echo"])
            #expect(three.status == 200)
            #expect(s.upstream.connections.withLockedValue { $0 } - before == 1, "one upstream TLS connection served three requests")
        }
    }

    @Test func aClientOutsideClientsAllowIsRefusedBeforeAnythingElse() async throws {
        try await InProcessProxy.run(policies: "hosts: []\n", mainConfig: "clients:\n  allow: [10.0.0.0/8]\n") { proxy in
            let client = try RawClient(port: proxy.port)
            let (head, body) = client.readResponse()  // answered before the client says anything
            #expect(head.hasPrefix("HTTP/1.1 403 Forbidden"))
            #expect(head.contains("X-Pinproxy-Error: client_denied"))
            #expect(body.contains("\"error\": \"client_denied\""))
            #expect(client.isClosedByPeer(within: 5))
        }
    }
}
