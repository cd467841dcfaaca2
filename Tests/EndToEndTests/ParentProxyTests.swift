import Foundation
import PinproxyTestSupport
import Testing

/// `upstream_proxy:` (docs/contract.md §15) with a real parent, tinyproxy from
/// Debian, in front of a real upstream (`openssl s_server`): the leg goes
/// through the parent's CONNECT, and pinproxy's own TLS and pins hold inside.
@Suite("Parent proxy end to end", .blockingWaits, .serialized,
       .enabled(if: Repository.which("tinyproxy") != nil, "tinyproxy is not installed (scripts/install-deps)"))
struct ParentProxyTests {
    /// tinyproxy on loopback with a config in the test's directory. It cannot
    /// bind port 0 (it insists on a `Port`), so a free port is found first;
    /// a lost race shows as tinyproxy exiting, and another port is tried.
    final class Tinyproxy: @unchecked Sendable {
        let process: ChildProcess
        let port: Int

        init(directory: TemporaryDirectory, connectPorts: [Int], basicAuth: (String, String)? = nil) throws {
            var lastError: any Error = TestSupportError("tinyproxy did not start")
            for attempt in 0..<5 {
                let port = try freePort()
                var config = "Port \(port)\nListen 127.0.0.1\nTimeout 30\nLogLevel Connect\nMaxClients 20\nAllow 127.0.0.1\n"
                config += connectPorts.map { "ConnectPort \($0)\n" }.joined()
                if let (user, password) = basicAuth { config += "BasicAuth \(user) \(password)\n" }
                let file = try directory.write("tinyproxy-\(attempt).conf", config)
                let process = try ChildProcess("tinyproxy", ["-d", "-c", file], directory: directory, name: "tinyproxy-\(attempt)")
                if pollUntilBlocking(timeout: 10, { Self.accepts(port) || !process.isRunning }), process.isRunning {
                    self.process = process
                    self.port = port
                    return
                }
                process.stop()
                lastError = TestSupportError("tinyproxy on \(port) did not start: \(process.outputText)")
            }
            throw lastError
        }

        deinit { process.stop() }

        var log: String { process.outputText }

        static func accepts(_ port: Int) -> Bool {
            (try? RawClient(port: port)).map { $0.closeNow(); return true } ?? false
        }
    }

    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let server: OpenSSLServer
        let parent: Tinyproxy
        let proxy: ProxyHarness

        /// `refuse`: the parent allows CONNECT to port 1 only, so it answers 403.
        init(refuse: Bool = false, parentAuth: (String, String)? = nil, credentialsInURL: String? = nil) throws {
            dir = try TemporaryDirectory("pinproxy-parent")
            let pki = try TestPKI.make(in: dir, names: ["pinned.test", "wrongpin.test", "tunnelled.test"])
            server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
            parent = try Tinyproxy(directory: dir, connectPorts: refuse ? [1] : [server.port], basicAuth: parentAuth)
            let good = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let parentURL = "http://\(credentialsInURL.map { "\($0)@" } ?? "")127.0.0.1:\(parent.port)"
            let common = """
                    upstream: 127.0.0.1:\(server.port)
                    upstream_proxy: \(parentURL)
                    tls: { ca_file: \(pki.rootCertificate) }
                    probe_interval: 0
                    retries: 0
                """
            proxy = try ProxyHarness(policies: """
                hosts:
                  - match: pinned.test
                \(common)
                    pins: { spki_sha256: [{pin: "\(good)"}, {pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}] }
                  - match: wrongpin.test
                \(common)
                    pins: { spki_sha256: [{pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}, {pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}] }
                  - match: tunnelled.test
                    action: tunnel
                \(common)
                """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        }

        func get(_ host: String, caFile: String? = nil) throws -> CurlResult {
            try Curl.run("https://\(host)/", proxy: proxy, caFile: caFile, directory: dir)
        }
    }

    @Test func theUpstreamLegGoesThroughTheParentAndPinsStillHold() throws {
        let stack = try Stack()
        let pinned = try stack.get("pinned.test")
        #expect(pinned.status == 200, "\(pinned.body) \(pinned.stderr)")
        // The parent carried it: its log names the CONNECT, and pinproxy's
        // access line names the parent as the address it spoke to.
        #expect(pollUntilBlocking(timeout: 5) { stack.parent.log.contains("CONNECT") && stack.parent.log.contains("127.0.0.1:\(stack.server.port)") },
                "\(stack.parent.log)")
        let line = stack.proxy.waitForAccessLog(count: 1).last
        #expect(line?["upstream"] as? String == "127.0.0.1:\(stack.parent.port)")

        // A wrong pin through the parent is still refused, by pinproxy's own handshake.
        let wrong = try stack.get("wrongpin.test")
        #expect(wrong.status == 502)
        #expect(wrong.pinproxyError == "pin_mismatch", "\(wrong.body)")
    }

    @Test func aTunnelGoesThroughTheParentToo() throws {
        let stack = try Stack()
        // A blind tunnel: the app's own TLS reaches s_server through pinproxy and the parent.
        let tunnelled = try Curl.run("https://tunnelled.test/", proxy: stack.proxy, caFile: stack.dir.file("pki/root.pem"), directory: stack.dir)
        #expect(tunnelled.connectStatus == 200)
        #expect(tunnelled.status == 200, "\(tunnelled.stderr)")
    }

    @Test func aParentRefusingConnectGives502WithItsStatus() throws {
        let stack = try Stack(refuse: true)
        let refused = try stack.get("pinned.test")
        #expect(refused.status == 502)
        #expect(refused.pinproxyError == "connect_failed")
        #expect(refused.body.contains("parent proxy http://127.0.0.1:\(stack.parent.port) refused CONNECT 127.0.0.1:\(stack.server.port): 403"), "\(refused.body)")
    }

    @Test func parentCredentialsAreSentAndAWrongOneIsItsRefusal() throws {
        let right = try Stack(parentAuth: ("egress", "parent-pw"), credentialsInURL: "egress:parent-pw")
        #expect(try right.get("pinned.test").status == 200)
        let wrong = try Stack(parentAuth: ("egress", "parent-pw"), credentialsInURL: "egress:nope")
        let refused = try wrong.get("pinned.test")
        #expect(refused.status == 502)
        // tinyproxy answers a wrong BasicAuth with 401 (not 407); whatever it says is passed on.
        #expect(refused.body.contains("refused CONNECT 127.0.0.1:\(wrong.server.port): 401"), "\(refused.body)")
        #expect(!wrong.proxy.log.contains("nope"), "the parent's password is never logged")
    }

    /// The SSRF guard vets the parent like any upstream (docs/contract.md §15):
    /// a parent it refuses is 403 `ssrf_blocked` inside the session, one access
    /// line, and the process lives (a debug build used to trap on a leaked promise).
    @Test func aParentTheGuardRefusesIsA403InsideTheSession() throws {
        let dir = try TemporaryDirectory("pinproxy-parent-guard")
        let pki = try TestPKI.make(in: dir, names: ["guarded.test"])
        // Port 9 (discard) is never dialled: the guard refuses 127.0.0.1 first.
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: guarded.test
                upstream: 127.0.0.1:9
                upstream_proxy: http://127.0.0.1:9
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
                retries: 0
              - match: guarded-tunnel.test
                action: tunnel
                upstream_proxy: http://127.0.0.1:9
                probe_interval: 0
            """, mainConfig: "network:\n  deny_private: true\n  allow: []\n", directory: dir)
        let refused = try Curl.run("https://guarded.test/", proxy: proxy, directory: dir)
        #expect(refused.connectStatus == 200)
        #expect(refused.status == 403, "\(refused.body) \(refused.stderr)")
        #expect(refused.pinproxyError == "ssrf_blocked", "\(refused.body)")
        #expect(refused.body.contains("parent proxy"), "\(refused.body)")
        let lines = proxy.waitForAccessLog(count: 1)
        #expect(lines.filter { ($0["host"] as? String) == "guarded.test" }.count == 1, "\(lines)")

        let tunnel = try Curl.run("https://guarded-tunnel.test/", proxy: proxy, directory: dir)
        #expect(tunnel.connectStatus == 403, "\(tunnel.stderr)")
        #expect(proxy.process.isRunning, "\(proxy.log)")
    }
}
