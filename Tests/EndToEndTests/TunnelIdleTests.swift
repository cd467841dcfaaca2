import Foundation
import PinproxyTestSupport
import Testing

/// A CONNECT tunnel (action `tunnel`) that moves no byte either way for
/// `limits.idle_timeout` is closed on both sides, logged and counted
/// (docs/contract.md §10, §6 `idle_closes_total`): an app cannot hold a
/// client and an upstream descriptor for ever.
@Suite("tunnel idle timeout", .blockingWaits)
struct TunnelIdleTests {
    @Test func anIdleTunnelIsClosedLoggedAndCounted() throws {
        let dir = try TemporaryDirectory("pinproxy-tunnel-idle")
        let upstream = try ScriptedUpstream(directory: dir)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: "quiet.test"
                action: tunnel
                upstream: 127.0.0.1:\(upstream.port)
            """, mainConfig: "network:\n  allow: [127.0.0.0/8]\nlimits:\n  idle_timeout: 1s\n", directory: dir)
        let client = try RawClient(port: proxy.port)
        client.send("CONNECT quiet.test:443 HTTP/1.1\r\nHost: quiet.test:443\r\n\r\n")
        let (head, _) = client.readResponse()
        #expect(head.hasPrefix("HTTP/1.1 200"), "\(head)")
        // Bytes move first (an exchange through the tunnel), then nothing does.
        client.send("GET /ok HTTP/1.1\r\nHost: quiet.test\r\n\r\n")
        let (answer, body) = client.readResponse()
        #expect(answer.hasPrefix("HTTP/1.1 200") && body == "ok", "\(answer)\(body)")
        #expect(client.isClosedByPeer(within: 15), "the idle tunnel must be closed")

        #expect(pollUntilBlocking { proxy.log.contains("\"tunnel idle; closed\"") }, "\(proxy.log)")
        let line = try #require(proxy.waitForAccessLog(count: 1).first { $0["mode"] as? String == "tunnel" })
        #expect(line["status"] as? Int == 200)
        let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect(metrics.value("pinproxy_idle_closes_total", ["host": "quiet.test", "kind": "tunnel"]) == 1, "\(scrape.body)")
    }
}
