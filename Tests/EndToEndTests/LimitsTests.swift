import Foundation
import PinproxyTestSupport
import Testing

/// Limits and robustness: slow-loris, oversize heads, garbage, many clients,
/// a large download to a slow reader, and SIGTERM in the middle of a response.
@Suite("Limits, streaming and shutdown", .blockingWaits, .serialized)
struct LimitsTests {
    static let setup = Task.blockingSetup {
        try await Scenario("pinproxy-limits", names: ["api.test", "plain.test"], hosts: [
            .intercept("api.test", "upgrade_to_tls: true", "max_upstream_connections: 32", "queue_timeout: 60s"),
        ], mainConfig: "limits:\n  header_timeout: 1s\n  max_header_bytes: 65536\n")
    }

    @Test func aSlowLorisClientIsClosedAfterTheHeaderTimeout() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://api.test/ HTTP/1.1\r\n")
        var closed = false
        // Drip a header line every 200 ms for up to 10 s; the proxy must hang up.
        for i in 0..<50 {
            if client.isClosedByPeer(within: 0.2) || !client.send("X-Drip-\(i): x\r\n") {
                closed = true
                break
            }
        }
        #expect(closed, "the connection was still open after 10 s of a head that never ends")
        // Log lines are written by pinproxy's log thread: allow it a moment.
        #expect(await pollUntil(timeout: 10) { s.proxy.log.contains("no complete request head within header_timeout") })
    }

    @Test func aHeadSplitAcrossReadsIsServedAndPlainHTTPIsUpgradedToTLS() async throws {
        let s = try await Self.setup.value
        let client = try RawClient(port: s.proxy.port)
        client.send("GET http://api.test/echo HTTP/1.1\r\nHo")
        // Pacing, not a wait for an outcome: the rest goes as a later packet, so
        // the proxy most likely reads the head in two parts.
        usleep(200_000)
        client.send("st: api.test\r\nConnection: close\r\n\r\n")
        let response = client.readToEnd()
        #expect(response.hasPrefix("HTTP/1.1 200 OK"), "\(response.prefix(300))")
        // The upstream only speaks TLS: a 200 means upgrade_to_tls took the request there over TLS.
        #expect(response.contains("\"uri\": \"/echo\""))
    }

    @Test func aHundredKilobyteHeaderGets431() async throws {
        let s = try await Self.setup.value
        let big = String(repeating: "x", count: 100_000)
        let result = try Curl.run("http://api.test/", proxy: s.proxy, extra: ["-H", "X-Big: \(big)"], directory: s.dir)
        #expect(result.status == 431, "\(result.stderr)")
        #expect(result.pinproxyError == "bad_request")
        #expect(result.body.contains("max_header_bytes (65536 bytes)"))
    }

    @Test func randomBytesGet400AndTheProxyKeepsServing() async throws {
        let s = try await Self.setup.value
        var generator = SystemRandomNumberGenerator()
        let garbage = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let client = try RawClient(port: s.proxy.port)
        client.send(garbage + Array("\r\n\r\n".utf8))
        let response = client.readToEnd()
        #expect(response.hasPrefix("HTTP/1.1 400 Bad Request"), "\(response.prefix(200))")
        #expect(response.contains("X-Pinproxy-Error: bad_request"))
        let after = try Curl.run("https://api.test/echo", proxy: s.proxy, directory: s.dir)
        #expect(after.status == 200)
    }

    @Test func fiveHundredConcurrentClientsAreAllServed() async throws {
        let s = try await Self.setup.value
        let script = try s.dir.write("many.py", """
            import asyncio, collections, ssl, sys
            PROXY_PORT, CA, N = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
            ctx = ssl.create_default_context(cafile=CA)
            phase = ["open"] * N  # where each client is, to say where a stuck one stopped
            async def one(i, gate):
                reader, writer = await asyncio.open_connection("127.0.0.1", PROXY_PORT)
                phase[i] = "gate"
                await gate.wait()  # every connection is open before any request starts
                writer.write(b"CONNECT api.test:443 HTTP/1.1\\r\\nHost: api.test:443\\r\\n\\r\\n")
                phase[i] = "connect"
                head = await reader.readuntil(b"\\r\\n\\r\\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    return "connect:" + head.decode(errors="replace")[:40]
                phase[i] = "tls"
                await writer.start_tls(ctx, server_hostname="api.test")
                writer.write(b"GET /echo?i=%d HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n" % i)
                phase[i] = "response"
                data = await reader.read()
                writer.close()
                phase[i] = "done"
                return "ok" if data.startswith(b"HTTP/1.1 200") and (b"/echo?i=%d" % i) in data else "bad:" + data[:60].decode(errors="replace")
            async def main():
                gate = asyncio.Event()
                tasks = [asyncio.create_task(one(i, gate)) for i in range(N)]
                await asyncio.sleep(0.5)
                gate.set()
                try:
                    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=240)
                except asyncio.TimeoutError:
                    print("stuck after 240 s, by phase:", dict(collections.Counter(p for p in phase if p != "done")))
                    sys.exit(1)
                ok = sum(1 for r in results if r == "ok")
                print("ok", ok, "of", N)
                for r in results:
                    if r != "ok":
                        print("failure:", r)
                        break
            asyncio.run(main())
            """)
        let (status, output) = try ChildProcess.run("python3", [script, String(s.proxy.port), s.proxy.caFile, "500"])
        #expect(status == 0, "\(output)\npinproxy's log, last lines:\n\(s.proxy.log.suffix(4000))")
        #expect(output.contains("ok 500 of 500"), "\(output)")
    }

    @Test func twoHundredFiftySixMiBReachASlowReaderByteExactInBoundedMemory() async throws {
        let s = try await Self.setup.value
        let total = 256 * 1024 * 1024
        let rssBefore = try #require(Self.residentBytes(pid: s.proxy.process.pid))
        let peak = PeakSampler(pid: s.proxy.process.pid)
        let output = s.dir.file("download.bin")
        // A slow reader: curl drains at 48 MiB/s while the upstream can send far faster.
        let result = try Curl.run("https://api.test/bytes/\(total)", proxy: s.proxy,
                                  extra: ["--limit-rate", "48M"], output: output, directory: s.dir)
        let rssPeak = peak.stop()
        #expect(result.status == 200, "\(result.stderr)")
        #expect(try Self.matchesPattern(file: output, count: total))
        if let size = try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int, size != total {
            Issue.record("downloaded \(size) bytes, expected \(total): \(result.stderr)")
        }
        let growth = max(rssPeak, rssBefore) - rssBefore
        #expect(growth < 64 * 1024 * 1024, "pinproxy grew by \(growth / 1024 / 1024) MiB")
        try? FileManager.default.removeItem(atPath: output)
    }

    /// A proxy with `shutdown_grace` in front of a slow upstream, and curl
    /// waiting on a response that takes `milliseconds`, held by the upstream.
    static func slowResponseInFlight(grace: String, milliseconds: Int, directory name: String, extraConfig: String = "") async throws
        -> (dir: TemporaryDirectory, upstream: TestUpstream, proxy: ProxyHarness, curl: ChildProcess) {
        let dir = try TemporaryDirectory(name)
        let pki = try TestPKI.make(in: dir, names: ["api.test"])
        let upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: api.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\nlimits:\n  shutdown_grace: \(grace)\n" + extraConfig, directory: dir)
        let curl = try ChildProcess("/usr/bin/curl", [
            "-sS", "--proxy", proxy.proxyURL, "--cacert", proxy.caFile, "-w", "\nstatus=%{http_code}", "https://api.test/slow/\(milliseconds)",
        ], directory: dir, name: "curl-slow")
        // Wait until the upstream holds the request; the caller then asks pinproxy to stop.
        _ = await pollUntil(every: 0.02) { upstream.requests.withLockedValue { $0.contains("GET /slow/\(milliseconds)") } }
        return (dir, upstream, proxy, curl)
    }

    @Test func sigtermDuringAResponseLetsItFinishAndExitsZero() async throws {
        let (dir, upstream, proxy, curl) = try await Self.slowResponseInFlight(grace: "10s", milliseconds: 2000, directory: "pinproxy-sigterm")
        defer { upstream.stop() }
        let admin = try proxy.adminPort
        proxy.process.signal(SIGTERM)
        // During the drain: the listener is closed (a new app is refused at
        // once) while the admin API still answers, with /readyz at 503.
        let draining = await pollUntil(timeout: 1.5, every: 0.05) {
            (try? Curl.run("http://127.0.0.1:\(admin)/readyz", proxyURL: nil, caFile: nil, directory: dir).status) == 503
        }
        #expect(draining, "/readyz reports the drain")
        let late = try Curl.run("http://api.test/", proxyURL: proxy.proxyURL, caFile: nil, extra: ["--max-time", "5"], directory: dir)
        #expect(late.exitCode == 7, "a connection made during the drain is refused (curl exit \(late.exitCode), status \(late.status))")
        let curlStatus = curl.waitForExit(timeout: 20)
        let proxyStatus = proxy.process.waitForExit(timeout: 20)
        #expect(curlStatus == 0)
        #expect(curl.outputText.contains("slow response after 2000 ms"))
        #expect(curl.outputText.contains("status=200"))
        #expect(proxyStatus == 0, "\(proxy.log.suffix(600))")
    }

    /// The transparent listener closes with the proxy listener when the
    /// drain begins. Both once shared one quiescing helper, which knows only
    /// the first server channel it served: the transparent listener went on
    /// accepting during the whole drain.
    @Test func sigtermClosesTheTransparentListenerTooDuringTheDrain() async throws {
        let (_, upstream, proxy, curl) = try await Self.slowResponseInFlight(
            grace: "30s", milliseconds: 8000, directory: "pinproxy-sigterm-transparent",
            extraConfig: "transparent:\n  listen: 127.0.0.1:0\n")
        defer { upstream.stop() }
        let transparent = try proxy.listeningPort("transparent listening")
        #expect((try? RawClient(port: transparent)) != nil, "the transparent listener accepts before the drain")
        proxy.process.signal(SIGTERM)
        // Refused while curl still waits for its response: the drain is still
        // on, so it was the drain that closed the listener, not the exit.
        let refused = await pollUntil(timeout: 30, every: 0.02) { (try? RawClient(port: transparent)) == nil }
        #expect(refused && curl.isRunning, "the transparent listener is closed during the drain, not only at exit")
        #expect((try? RawClient(port: proxy.port)) == nil, "the proxy listener is closed too")
        #expect(curl.waitForExit(timeout: 30) == 0, "the response in flight still finishes: \(curl.outputText)")
        #expect(proxy.process.waitForExit(timeout: 30) == 0, "\(proxy.log.suffix(600))")
    }

    @Test func aResponseSlowerThanTheGraceIsCutOffAndCounted() async throws {
        let (_, upstream, proxy, curl) = try await Self.slowResponseInFlight(grace: "1s", milliseconds: 8000, directory: "pinproxy-grace")
        defer { upstream.stop() }
        proxy.process.signal(SIGTERM)
        let curlStatus = curl.waitForExit(timeout: 20)
        let proxyStatus = proxy.process.waitForExit(timeout: 20)
        #expect(curlStatus != 0, "the response was cut off, not completed: \(curl.outputText)")
        #expect(!curl.outputText.contains("slow response after"))
        #expect(proxyStatus == 0, "\(proxy.log.suffix(600))")
        #expect(proxy.log.contains("shutdown grace ran out"), "\(proxy.log.suffix(600))")
    }

    @Test func idleConnectionsDoNotHoldTheDrain() async throws {
        let dir = try TemporaryDirectory("pinproxy-idle-drain")
        // A grace far longer than the wait below: only closing idle
        // connections at once lets pinproxy exit within it.
        let proxy = try ProxyHarness(policies: "hosts: []\n",
                                     mainConfig: "network:\n  allow: [127.0.0.0/8]\nlimits:\n  shutdown_grace: 600s\n", directory: dir)
        let idle = try RawClient(port: proxy.port)
        // The listener has accepted it before the signal goes out.
        #expect(await pollUntil(every: 0.02) { proxy.log.contains("proxy listening") })
        proxy.process.signal(SIGTERM)
        let proxyStatus = proxy.process.waitForExit(timeout: 30)
        #expect(proxyStatus == 0, "pinproxy exited while idle connections were open: \(proxy.log.suffix(600))")
        #expect(proxy.log.contains("all client connections finished"), "\(proxy.log.suffix(600))")
        #expect(idle.readToEnd().isEmpty, "the idle connection was closed without an answer")
    }

    // MARK: Helpers

    static func residentBytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else { return nil }
        return kib * 1024
    }

    static func matchesPattern(file: String, count: Int) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: file) else { return false }
        defer { try? handle.close() }
        var offset = 0
        while offset < count {
            let chunk = try handle.read(upToCount: 1 << 20) ?? Data()
            if chunk.isEmpty { return false }
            if [UInt8](chunk) != TestPattern.slice(at: offset, count: chunk.count) { return false }
            offset += chunk.count
        }
        let trailing = try handle.read(upToCount: 1) ?? Data()
        return offset == count && trailing.isEmpty
    }

    /// Samples a process's resident memory every 50 ms on a thread until stopped.
    final class PeakSampler: @unchecked Sendable {
        private let lock = NSLock()
        private var peak = 0
        private var running = true
        private let done = DispatchSemaphore(value: 0)

        init(pid: Int32) {
            Thread {
                while self.lock.withLock({ self.running }) {
                    if let rss = LimitsTests.residentBytes(pid: pid) { self.lock.withLock { self.peak = max(self.peak, rss) } }
                    usleep(50_000)  // the sampling period, not a wait
                }
                self.done.signal()
            }.start()
        }

        func stop() -> Int {
            lock.withLock { running = false }
            done.wait()
            return lock.withLock { peak }
        }
    }
}

extension LimitsTests {
    @Test func pastMaxClientConnectionsClientsWaitInTheBacklogUntilASlotFrees() async throws {
        let dir = try TemporaryDirectory("pinproxy-maxconn")
        let proxy = try ProxyHarness(policies: "hosts: []\n", mainConfig: "limits:\n  max_client_connections: 2\n  idle_timeout: 60s\n", directory: dir)
        let first = try RawClient(port: proxy.port)
        let second = try RawClient(port: proxy.port)
        // Both slots are taken (the two are accepted: a request on each is answered).
        second.send("GET http://nowhere.test/ HTTP/1.1\r\nHost: nowhere.test\r\n\r\n")
        #expect(second.readResponse().head.hasPrefix("HTTP/1.1 403"))
        // The third connects (the kernel's backlog) but is not served while both slots are held...
        let third = try RawClient(port: proxy.port)
        third.send("GET http://nowhere.test/ HTTP/1.1\r\nHost: nowhere.test\r\nConnection: close\r\n\r\n")
        #expect(!third.hasData(within: 1), "a third client was served past max_client_connections")
        // ...and is served as soon as one slot frees.
        _ = first  // keeps the first slot until here
        first.closeNow()
        #expect(third.readResponse().head.hasPrefix("HTTP/1.1 403 Forbidden"))
    }
}
