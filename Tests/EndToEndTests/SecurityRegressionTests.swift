import Foundation
import PinproxyTestSupport
import Testing

/// Attacks that once worked against pinproxy, each replayed on loopback
/// against the real binary: smuggling through framing the encoder guessed,
/// oversize heads, other spellings of a denied IP, a request sent twice, an
/// unasked 101, a stalled body holding a host's only slot, a CONNECT logged
/// twice. Every test here failed before its fix.
@Suite("Security regressions", .blockingWaits, .serialized)
struct SecurityRegressionTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let upstream: TestUpstream
        let scripted: ScriptedUpstream
        let blackhole: Blackhole
        let proxy: ProxyHarness

        /// One value of the proxy's `/metrics`.
        func metric(_ name: String, _ labels: [String: String]) throws -> Double? {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body).value(name, labels)
        }

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-security")
            pki = try TestPKI.make(in: dir, names: ["api.test"])
            upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
            scripted = try ScriptedUpstream(directory: dir)
            blackhole = try Blackhole()
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("api.test", "upgrade_to_tls: true"),
                .tunnel("plain.test", upstream: .port(scripted.port), "response_timeout: 1s"),
                .tunnel("slot.test", upstream: .port(scripted.port), "max_upstream_connections: 1", "queue_timeout: 20s"),
                .tunnel("hole.test", upstream: .port(blackhole.port), "connect_timeout: 5s", "retries: 0"),
                .deny("127.0.0.1"),
            ], upstreamPort: upstream.port, caFile: pki.rootCertificate),
            mainConfig: "default_action: tunnel\n" + Scenario.loopbackAllowed + "limits:\n  idle_timeout: 2s\n", directory: dir)
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    static let smuggled = "GET /SMUGGLED HTTP/1.1\r\nHost: evil.test\r\nAuthorization: Bearer attacker\r\n\r\n"

    // MARK: Item 1: framing is pinproxy's decision

    @Test(arguments: [
        ("TRACE with a length", "TRACE http://api.test/echo-trace HTTP/1.1\r\nHost: api.test\r\nContent-Length: \(smuggled.utf8.count)\r\n\r\n\(smuggled)"),
        ("GET with capital Chunked", "GET http://api.test/echo-chunked HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: Chunked\r\n\r\n"
            + String(smuggled.utf8.count, radix: 16) + "\r\n\(smuggled)\r\n0\r\n\r\n"),
        ("DELETE with a length", "DELETE http://api.test/echo-delete HTTP/1.1\r\nHost: api.test\r\nContent-Length: \(smuggled.utf8.count)\r\n\r\n\(smuggled)"),
    ])
    func aBodyOnABodilessMethodGoesUpFramedAndNeverAsASecondRequest(shape: String, request: String) async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send(request + "GET http://api.test/echo-after HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 200"), "\(shape): \(text.prefix(300))")
        #expect(text.contains("\"body_bytes\": \(Self.smuggled.utf8.count)"), "\(shape): the upstream read the body as a body: \(text.prefix(600))")
        #expect(text.contains("\"uri\": \"/echo-after\""), "\(shape): the next request got its own answer")
        #expect(!text.contains("/SMUGGLED"), "\(shape)")
        // Another app's request on the (pooled) upstream connection gets its own answer.
        let victim = try Curl.run("http://api.test/echo-victim", proxy: s.proxy, directory: s.dir)
        #expect(victim.body.contains("\"uri\": \"/echo-victim\""), "\(victim.body)")
        #expect(!s.upstream.requests.withLockedValue { $0 }.contains { $0.contains("SMUGGLED") }, "\(shape): nothing was smuggled upstream")
    }

    @Test func connectionNamingContentLengthIsRefused() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://api.test/echo-connection HTTP/1.1\r\nHost: api.test\r\nConnection: content-length\r\n"
                    + "Content-Length: \(Self.smuggled.utf8.count)\r\n\r\n\(Self.smuggled)")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 400"), "\(text.prefix(300))")
        #expect(text.contains("X-Pinproxy-Error: bad_request"))
        #expect(!s.upstream.requests.withLockedValue { $0 }.contains { $0.contains("/echo-connection") || $0.contains("SMUGGLED") })
    }

    @Test func framingInsideAnInterceptedSessionIsDecidedTheSameWay() async throws {
        let s = try await Self.setup.value
        let script = try s.dir.write("smuggle_tls.py", #"""
            import socket, ssl, sys
            port, ca, smuggled = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
            sock = socket.create_connection(("127.0.0.1", port), timeout=20)
            sock.sendall(b"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            tls = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="api.test")
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(smuggled), smuggled)
            tls.sendall(b"GET /echo-in-session HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: Chunked\r\n\r\n" + body
                        + b"GET /echo-in-session-after HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
            sys.stdout.write(data.decode("latin-1"))
            """#)
        let (status, output) = try ChildProcess.run("python3", [script, String(s.proxy.port), s.proxy.caFile, Self.smuggled])
        #expect(status == 0, "\(output)")
        #expect(output.contains("\"body_bytes\": \(Self.smuggled.utf8.count)"), "\(output.prefix(600))")
        #expect(output.contains("/echo-in-session-after"))
        #expect(!s.upstream.requests.withLockedValue { $0 }.contains { $0.contains("SMUGGLED") })
    }

    // MARK: Item 7: the whole head counts

    @Test func aHeadOfManyTinyFieldsIsRefusedWith431() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        let fields = String(repeating: "a: b\r\n", count: 20_000)  // 120 KB of head, 40 KB of names and values
        client.send("GET http://api.test/echo-many HTTP/1.1\r\nHost: api.test\r\n" + fields + "\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 431"), "\(text.prefix(300))")
        #expect(!s.upstream.requests.withLockedValue { $0 }.contains("GET /echo-many"))
    }

    @Test func aRequestLineLongerThanTheLimitIsRefusedWith431() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        let path = "/echo-long?" + String(repeating: "q", count: 100_000)
        client.send("GET http://api.test\(path) HTTP/1.1\r\nHost: api.test\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 431"), "\(text.prefix(300))")
    }

    @Test func aConnectionHeaderWithTooManyTokensIsRefused() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        let tokens = (0..<40).map { "x-\($0)" }.joined(separator: ", ")
        client.send("GET http://api.test/echo-tokens HTTP/1.1\r\nHost: api.test\r\nConnection: \(tokens)\r\n\r\n")
        #expect(client.readToEnd().hasPrefix("HTTP/1.1 400"))
    }

    // MARK: Item 8: one spelling of an address

    @Test(arguments: ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "127.0.0.1."])
    func otherSpellingsOfADeniedAddressAreDenied(spelling: String) async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("CONNECT \(spelling):\(s.scripted.port) HTTP/1.1\r\nHost: \(spelling):\(s.scripted.port)\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 403"), "\(spelling): \(text.prefix(200))")
        #expect(text.contains("host_denied"), "\(spelling)")
        let plain = try RawClient(port: s.proxy.port)
        plain.send("GET http://\(spelling):\(s.scripted.port)/denied HTTP/1.1\r\nHost: \(spelling)\r\nConnection: close\r\n\r\n")
        #expect(plain.readToEnd().hasPrefix("HTTP/1.1 403"), "\(spelling), absolute-form")
    }

    @Test func aHostThatEndsInANumberButIsNoAddressIsRefused() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("CONNECT 127.0.0.256:443 HTTP/1.1\r\nHost: 127.0.0.256:443\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 400"), "\(text.prefix(200))")
    }

    // MARK: Item 9: a request lost on a reused connection is sent again only when that is safe

    @Test(arguments: ["/close-after-request", "/stray"])
    func aPostLostOnAReusedConnectionIsNeverSentTwice(path: String) async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        // One connection: a warm-up that leaves the upstream connection pooled, then the POST on it.
        client.send("GET http://plain.test/warm HTTP/1.1\r\nHost: plain.test\r\n\r\n")
        #expect(client.readResponse().head.hasPrefix("HTTP/1.1 200"))
        client.send("POST http://plain.test\(path)-post HTTP/1.1\r\nHost: plain.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 502"), "\(text.prefix(300))")
        // A resend would have gone out before the 502. A later request seen by
        // the upstream proves that whatever pinproxy sent before it has arrived.
        let marker = "/marker-\(UUID().uuidString)"
        let after = try RawClient(port: s.proxy.port)
        after.send("GET http://plain.test\(marker) HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n")
        _ = after.readToEnd()
        #expect(await pollUntil { s.scripted.count("GET \(marker)") == 1 }, "\(s.scripted.requests)")
        #expect(s.scripted.count("POST \(path)-post") == 1, "\(s.scripted.requests)")
    }

    // MARK: Item 12: an unasked 101 ends its upstream connection

    @Test func anUnaskedSwitchingProtocolsIsRefusedAndItsConnectionNotReused() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://plain.test/switch HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 502"), "\(text.prefix(300))")
        #expect(text.contains("101"), "the detail names the 101")
        let next = try Curl.run("http://plain.test/after-switch", proxy: s.proxy, extra: ["--max-time", "10"], directory: s.dir)
        #expect(next.status == 200, "the next request gets a fresh connection: \(next.stderr)")
        #expect(next.body == "ok")
    }

    // MARK: An answer whose status is below 100 (docs/contract.md §10)

    /// NIO's decoder reads `HTTP/1.1 099` and pinproxy passed it on as
    /// `HTTP/1.1 99`, a status line no HTTP/1.1 client should have to parse
    /// (found by the head path's differential tests, issue 33). Now the head
    /// path, which reads the upstream's answers, refuses it: 502
    /// `connect_failed` naming what was wrong, and the connection is not
    /// reused.
    @Test func anAnswerWithAStatusBelow100Is502AndItsConnectionNotReused() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://plain.test/status-099 HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 502"), "\(text.prefix(300))")
        #expect(text.contains("X-Pinproxy-Error: connect_failed"), "\(text.prefix(300))")
        #expect(text.contains("a status code that is not three digits from 100"), "the detail names what was wrong: \(text.prefix(400))")
        let next = try Curl.run("http://plain.test/after-099", proxy: s.proxy, extra: ["--max-time", "10"], directory: s.dir)
        #expect(next.status == 200, "the next request gets a fresh connection: \(next.stderr)")
        #expect(next.body == "ok")
    }

    // MARK: Item 3: a stalled request body is cut and frees its slot

    @Test func aStalledBodyIsCutAndItsUpstreamSlotFreed() async throws {
        let s = try await Self.setup.value
        let staller = try RawClient(port: s.proxy.port)
        staller.send("POST http://slot.test/stalled HTTP/1.1\r\nHost: slot.test\r\nContent-Length: 1000\r\n\r\n0123456789")
        // It holds slot.test's only upstream connection once the gauge says so.
        #expect(try await pollUntil { try s.metric("pinproxy_upstream_connections", ["host": "slot.test"]) == 1 })
        let other = try Curl.run("http://slot.test/served", proxy: s.proxy, extra: ["--max-time", "30"], directory: s.dir)
        #expect(other.status == 200, "served once the stalled body was cut: \(other.status) \(other.body)")
        let text = staller.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 408"), "\(text.prefix(300))")
        #expect(text.contains("idle_timeout"))
    }

    // MARK: Item 14: a CONNECT whose app leaves during the dial is one line

    @Test func aConnectAbandonedDuringTheDialIsLoggedOnce() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        let sent = Date()
        client.send("CONNECT hole.test:443 HTTP/1.1\r\nHost: hole.test:443\r\n\r\n")
        // Pacing, not a wait for an outcome: the app leaves while the dial
        // (to a port that never answers) is under way. The connect_timeout
        // is 5 s, not 1 s: beside the other suites on two cores a 1 s dial
        // sometimes timed out (504 logged) before the proxy saw the close;
        // the failure message says how late the close came.
        try await Task.sleep(for: .milliseconds(300))
        client.closeNow()
        let closedAfter = Date().timeIntervalSince(sent)
        let logged = await pollUntil(timeout: 10) { s.proxy.accessLog.contains { ($0["host"] as? String) == "hole.test" } }
        #expect(logged)
        // A second CONNECT, started after the first's dial and with the same
        // connect_timeout, is answered once its own dial has timed out: by then
        // the first dial has ended too, and any second line for it is written.
        let later = try RawClient(port: s.proxy.port)
        later.send("CONNECT hole.test:443 HTTP/1.1\r\nHost: hole.test:443\r\n\r\n")
        let answer = later.readResponse().head
        #expect(!answer.isEmpty && !answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        later.closeNow()
        #expect(await pollUntil { s.proxy.accessLog.filter { ($0["host"] as? String) == "hole.test" }.count >= 2 })
        let lines = s.proxy.accessLog.filter { ($0["host"] as? String) == "hole.test" }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.filter { $0["status"] as? Int == 499 }.count == 1,
                "the abandoned CONNECT is one line (the app closed \(closedAfter) s after sending it): \(lines)")
    }
}

/// A loopback port whose accept queue is full and never drained: a connect
/// to it neither succeeds nor is refused, it hangs until its timeout.
final class Blackhole: @unchecked Sendable {
    let port: Int
    private let listener: LoopbackListener
    private let fillers: [Int32]

    init() throws {
        listener = try LoopbackListener(backlog: 0)
        port = listener.port
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        // Fill the queue with connections nobody accepts (non-blocking: a filler may itself hang).
        var fillers: [Int32] = []
        for _ in 0..<4 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(fd)
        }
        self.fillers = fillers
        // Pacing for the kernel: the fillers' handshakes land in the queue (a
        // poll cannot see it: past the first, their connects stay in progress).
        usleep(200_000)
    }

    deinit {
        fillers.forEach { close($0) }
    }
}
