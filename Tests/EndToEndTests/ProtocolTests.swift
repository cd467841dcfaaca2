import Foundation
import PinproxyTestSupport
import Testing

/// The HTTP a proxy owes: framing, HEAD, 100-continue, bodies both ways,
/// queueing and timeouts, and reloads retiring pooled connections.
@Suite("HTTP semantics through the proxy", .blockingWaits, .serialized)
struct ProtocolTests {
    static let setup = Task.blockingSetup {
        try await Scenario("pinproxy-protocol", names: ["api.test", "queue.test", "timeout.test", "reload.test"], hosts: [
            .intercept("api.test", "upgrade_to_tls: true"),
            .intercept("queue.test", "max_upstream_connections: 1", "queue_timeout: 1s"),
            .intercept("timeout.test", "response_timeout: 1s"),
        ]) { dir, pki, upstream in
            // A second policy file, rewritten by the reload test.
            try dir.write("etc/policies/reload.yaml", Scenario.policies([.intercept("reload.test")],
                                                                        upstreamPort: upstream.port, caFile: pki.rootCertificate))
        }
    }

    @Test(arguments: [
        ("both lengths", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("two lengths", "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ("odd encoding", "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
    ])
    func ambiguousFramingIsRefusedWith400(shape: String, headers: String) async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        let path = "/echo-smuggle-\(shape.replacingOccurrences(of: " ", with: "-"))"
        client.send("POST http://api.test\(path) HTTP/1.1\r\nHost: api.test\r\n" + headers)
        let response = client.readToEnd()
        #expect(response.hasPrefix("HTTP/1.1 400 Bad Request"), "\(shape): \(response.prefix(200))")
        #expect(response.contains("X-Pinproxy-Error: bad_request"), "\(shape)")
        #expect(!s.upstream.requests.withLockedValue { $0 }.contains("POST \(path)"), "nothing went upstream")
    }

    @Test func headHasNoBodyAndAPipelinedRequestAfterItIsIntact() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        // Two requests in one write: HEAD, then GET (pipelining).
        client.send("HEAD http://api.test/bytes/5000 HTTP/1.1\r\nHost: api.test\r\n\r\n" +
                    "GET http://api.test/echo HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        let parts = text.components(separatedBy: "\r\n\r\n")
        #expect(parts.count >= 3, "\(text.prefix(400))")
        #expect(parts[0].hasPrefix("HTTP/1.1 200 OK"))
        #expect(parts[0].lowercased().contains("content-length: 5000"))
        #expect(parts[1].hasPrefix("HTTP/1.1 200 OK"), "no HEAD body bytes precede the next response: \(parts[1].prefix(80))")
        #expect(parts[2].contains("\"uri\": \"/echo\""))
    }

    /// Three pipelined requests behind a slow one: each is answered in order,
    /// the last one ends the connection, and the proxy lives on (a queued
    /// request used to wait for ever for its own end, and a fourth head crashed
    /// the process).
    @Test func threePipelinedRequestsBehindASlowOneAreAllAnswered() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://api.test/slow/300 HTTP/1.1\r\nHost: api.test\r\n\r\n" +
                    "GET http://api.test/echo-first HTTP/1.1\r\nHost: api.test\r\n\r\n" +
                    "GET http://api.test/echo-second HTTP/1.1\r\nHost: api.test\r\n\r\n")
        // The fourth head goes as a later packet, once the slow request has
        // reached the upstream (so its 300 ms answer is still pending).
        #expect(await pollUntil(every: 0.02) { s.upstream.requests.withLockedValue { $0.contains("GET /slow/300") } })
        client.send("GET http://api.test/echo-third HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
        let text = client.readToEnd()
        let statuses = text.components(separatedBy: "HTTP/1.1 200 OK").count - 1
        #expect(statuses == 4, "\(text.prefix(600))")
        let first = text.range(of: "/echo-first"), second = text.range(of: "/echo-second"), third = text.range(of: "/echo-third")
        #expect(text.contains("slow response after 300 ms"))
        #expect(first != nil && second != nil && third != nil, "\(text.prefix(600))")
        if let first, let second, let third {
            #expect(first.lowerBound < second.lowerBound && second.lowerBound < third.lowerBound)
        }
        #expect(s.proxy.process.isRunning)
        let after = try Curl.run("http://api.test/echo", proxy: s.proxy, directory: s.dir)
        #expect(after.status == 200, "the proxy still serves: \(after.stderr)")
    }

    @Test func bodiesStreamUpInBothFramingsWithExpectContinue() async throws {
        let s = try await Self.setup.value
        let payload = try s.dir.write("payload.bin", String(repeating: "0123456789abcdef", count: 65_536))  // 1 MiB
        let sized = try Curl.run("https://api.test/echo", proxy: s.proxy,
                                 extra: ["--data-binary", "@\(payload)", "-H", "Expect: 100-continue"], directory: s.dir)
        #expect(sized.status == 200)
        #expect(sized.body.contains("\"body_bytes\": 1048576"), "\(sized.body.suffix(80))")
        let chunked = try Curl.run("https://api.test/echo", proxy: s.proxy,
                                   extra: ["-T", payload, "-H", "Transfer-Encoding: chunked"], directory: s.dir)
        #expect(chunked.status == 200)
        #expect(chunked.body.contains("\"body_bytes\": 1048576"))
    }

    @Test func aFullPoolQueuesAndThenAnswers503() async throws {
        let s = try await Self.setup.value
        let slow = try ChildProcess("/usr/bin/curl", [
            "-sS", "--proxy", s.proxy.proxyURL, "--cacert", s.proxy.caFile, "https://queue.test/slow/4000",
        ], directory: s.dir, name: "curl-queue")
        _ = await pollUntil(every: 0.02) { s.upstream.requests.withLockedValue { $0.contains("GET /slow/4000") } }
        let queued = try Curl.run("https://queue.test/echo", proxy: s.proxy, directory: s.dir)
        #expect(queued.status == 503)
        #expect(queued.pinproxyError == "queue_timeout")
        #expect(slow.waitForExit(timeout: 20) == 0)
        #expect(slow.outputText.contains("slow response after 4000 ms"))
    }

    /// An app connection keeps the upstream connection its last request used
    /// (parked, docs/contract.md §6); at `max_upstream_connections: 1` another
    /// app's request takes it rather than wait out `queue_timeout` (1 s) for a
    /// 503, and the first app's next request gets a connection again.
    @Test func aConnectionParkedByOneAppIsTakenByAnotherAtTheLimit() async throws {
        let s = try await Self.setup.value
        let apps = try AppsInTurn.answers(host: "queue.test", paths: ["/echo/parked-1", "/echo/parked-2", "/echo/parked-3"],
                                          proxyPort: s.proxy.port, caFile: s.proxy.caFile, in: s.dir)
        #expect(apps.status == 0, "\(apps.output)")
        #expect(apps.answers == ["200 -", "200 -", "200 -"], "\(apps.output)")
        let seen = s.upstream.requests.withLockedValue { $0 }
        #expect(["GET /echo/parked-1", "GET /echo/parked-2", "GET /echo/parked-3"].allSatisfy { seen.contains($0) })
    }

    @Test func noResponseWithinResponseTimeoutIs504() async throws {
        let s = try await Self.setup.value
        let result = try Curl.run("https://timeout.test/slow/3000", proxy: s.proxy, directory: s.dir)
        #expect(result.status == 504)
        #expect(result.pinproxyError == "upstream_timeout")
        #expect(result.body.contains("response_timeout"))
    }

    @Test func aReloadRetiresConnectionsOpenedUnderTheOldPolicy() async throws {
        let s = try await Self.setup.value
        let admin = "http://127.0.0.1:\(try s.proxy.adminPort)"
        let next = ["--next", "--proxy", s.proxy.proxyURL, "--cacert", s.proxy.caFile]
        let before = s.upstream.connections.withLockedValue { $0 }
        #expect(try Curl.run("https://reload.test/echo", proxy: s.proxy, extra: next + ["https://reload.test/echo"], directory: s.dir).status == 200)
        #expect(s.upstream.connections.withLockedValue { $0 } - before == 1)

        // Change the policy (a header rule): its digest changes, its pooled connection must go.
        let policy = try String(contentsOfFile: s.dir.file("etc/policies/reload.yaml"), encoding: .utf8)
        try s.dir.write("etc/policies/reload.yaml", policy + "\n    headers:\n      set: { X-Policy: v2 }\n")
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: s.dir)
        #expect(reload.status == 200, "\(reload.body)")
        let after = try Curl.run("https://reload.test/echo", proxy: s.proxy, directory: s.dir)
        #expect(after.body.contains("[\"X-Policy\", \"v2\"]"), "the new policy applies: \(after.body.prefix(300))")
        #expect(s.upstream.connections.withLockedValue { $0 } - before == 2, "a new upstream connection under the new policy")
    }
}

@Suite("run and check on the command line", .blockingWaits)
struct RunCommandTests {
    @Test func runWithAMissingConfigFileExits2NamingIt() throws {
        let (status, _, stderr) = try PinproxyBinary.run(["run", "--config", "/nonexistent/pinproxy.yaml"])
        #expect(status == 2)
        #expect(stderr.contains("/nonexistent/pinproxy.yaml"))
    }

    @Test func withNoConfigAndNoPoliciesTheEmbeddedDefaultsDenyEverything() throws {
        let dir = try TemporaryDirectory("pinproxy-defaults")
        let (status, stdout, _) = try PinproxyBinary.run(["check"], currentDirectory: dir.path)
        #expect(status == 0, "\(stdout)")
        #expect(stdout.contains("/etc/policies does not exist, so every host gets default_action deny"), "\(stdout)")
    }
}
