import Foundation
import PinproxyTestSupport
import Testing

/// The reported fail-open: with `default_action: tunnel`, a policy file
/// truncated in place was applied empty by the watcher, and its denied host
/// was tunnelled. The emptied file must be a failed reload (logged, counted,
/// in `/policies`) while the last good set keeps serving.
@Suite("A policy file rewritten in place", .blockingWaits)
struct PolicyRewriteEndToEndTests {
    @Test func anEmptiedPolicyFileKeepsTheLastGoodSetAndIsReportedAsAFailedReload() throws {
        let policy = "hosts:\n  - {match: 127.0.0.2, action: deny}\n"
        let proxy = try ProxyHarness(policies: policy, mainConfig: "default_action: tunnel\n")
        let dir = proxy.directory
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        func connect() throws -> CurlResult {
            try Curl.run("https://127.0.0.2:9/", proxy: proxy, extra: ["--max-time", "10"], directory: dir)
        }
        #expect(try connect().pinproxyError == "host_denied")

        // Truncated in place (as `> file` or an editor writing over it does) and left so.
        let path = dir.file("etc/policies/test.yaml")
        close(open(path, O_WRONLY | O_TRUNC))
        // The binary's watcher polls every second: a bounded poll of its log.
        let failed = pollUntilBlocking(every: 0.2) { proxy.log.contains("policy reload failed; the previous policy keeps serving") }
        #expect(failed, "the emptied file was not reported as a failed reload")
        // With log.format json (the default), the reload's lines are JSON like every other.
        let reloadLines = proxy.log.split(separator: "\n").filter { $0.contains("pinproxy.policy") }
        #expect(!reloadLines.isEmpty && reloadLines.allSatisfy { $0.hasPrefix("{") }, "\(reloadLines)")
        let denied = try connect()
        #expect(denied.connectStatus == 403 || denied.status == 403)
        #expect(denied.pinproxyError == "host_denied", "the denied host was not denied: \(denied.pinproxyError ?? "-")")

        let scrape = try PrometheusText(parsing: try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: dir).body)
        #expect((scrape.value("pinproxy_policy_reloads_total", ["result": "failure"]) ?? 0) >= 1)
        let policies = try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir).body
        let document = try #require(try JSONSerialization.jsonObject(with: Data(policies.utf8)) as? [String: Any])
        let lastReload = try #require(document["last_reload"] as? [String: Any])
        #expect(lastReload["result"] as? String == "failure")
        let errors = lastReload["errors"] as? [[String: Any]] ?? []
        #expect(errors.first?["file"] as? String == path, "\(errors)")
        #expect(errors.first?["line"] as? Int == 1)

        // Written again: live (the contract says within 5 s; a test on a shared machine allows more).
        try dir.write("etc/policies/test.yaml", policy + "  - {match: 127.0.0.3, action: deny}\n")
        let live = pollUntilBlocking(every: 0.2) { proxy.log.contains("policy reloaded") }
        #expect(live, "\(proxy.log.split(separator: "\n").filter { $0.contains("policy") })")
        let again = try Curl.run("https://127.0.0.3:9/", proxy: proxy, extra: ["--max-time", "10"], directory: dir)
        #expect(again.pinproxyError == "host_denied")
    }
}
