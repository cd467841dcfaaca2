import Foundation
import PinproxyTestSupport
import Testing

/// Dial backoff on the real binary (docs/contract.md §10, "Dial backoff"): a
/// burst of requests to an upstream that is down does not dial it once per
/// request; each request still gets the contract's refusal and one access
/// line, and once the upstream is back a request is served. The upstream is
/// Scripts/flapping_upstream.py, which counts the connections it accepts.
@Suite("Dial backoff end to end", .blockingWaits, .serialized)
struct DialBackoffTests {
    static let apps = 40

    @Test func aBurstToAnUpstreamThatIsDownDialsItAFewTimesAndEveryRequestGetsItsRefusal() throws {
        let dir = try TemporaryDirectory("pinproxy-dial-backoff")
        let pki = try TestPKI.make(in: dir, names: ["down.test"])
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/flapping_upstream.py").path
        let upstream = try ChildProcess("python3", ["-u", script, pki.chainFile, pki.leafKey], directory: dir, name: "flapping-upstream")
        defer { upstream.stop() }
        let port = try upstream.waitForOutput(timeout: 20) { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
        // retries: 0, so one dial is one accepted connection.
        let proxy = try ProxyHarness(policies: Scenario.policies([
            .intercept("down.test", upstream: .port(port), "retries: 0", "queue_timeout: 2s"),
        ], caFile: pki.rootCertificate), mainConfig: Scenario.loopbackAllowed, directory: dir)

        let answers = try ConcurrentApps.answers(Self.apps, host: "down.test", path: "/", proxyPort: proxy.port,
                                                 caFile: proxy.caFile, in: dir)
        #expect(answers.count == Self.apps, "\(answers)")
        // The upstream closes before the handshake: 502 tls_handshake, for the
        // requests that dialled and for those that waited out queue_timeout alike.
        #expect(answers.allSatisfy { $0.status == 502 && $0.error == "tls_handshake" }, "\(answers)")
        let lines = try #require(pollForBlocking(timeout: 10) { () -> [[String: Any]]? in
            let lines = proxy.accessLog.filter { ($0["host"] as? String) == "down.test" }
            return lines.count >= Self.apps ? lines : nil
        }, "\(proxy.accessLog.count) access lines")
        #expect(lines.count == Self.apps, "one access line each")
        #expect(lines.allSatisfy { $0["error"] as? String == "tls_handshake" }, "\(lines)")
        // One dial for the burst (the rest wait for its h2 streams), then one
        // each time the backoff timer fires while requests wait: 100 ms after
        // the first failure, doubling (jitter takes up to a fifth off), so at
        // most 9 timers fire within 20 s. Without backoff every request dialled.
        let accepts = upstream.outputText.components(separatedBy: "ACCEPT\n").count - 1
        #expect((1...10).contains(accepts), "\(accepts) dials for \(Self.apps) requests")

        upstream.signal(SIGUSR1)
        // Back up: a request is served once the key's backoff lets a dial go
        // (at most 5 s; a request that waits past queue_timeout meanwhile is refused).
        let served = pollUntilBlocking(timeout: 30, every: 0.2) {
            (try? Curl.run("https://down.test/", proxy: proxy, extra: ["--max-time", "10"], directory: dir))?.status == 200
        }
        #expect(served, "\(proxy.log.suffix(2000))")
        #expect(proxy.process.isRunning)
    }
}
