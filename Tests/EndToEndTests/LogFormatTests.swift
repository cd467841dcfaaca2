import Foundation
import PinproxyTestSupport
import Testing

/// `log.format: json`: every line pinproxy writes, on standard output or
/// standard error, from the first warning of the initial load to the last
/// line of the shutdown, is one JSON object.
@Suite("Log format", .blockingWaits)
struct LogFormatTests {
    @Test func everyLineFollowsTheJSONFormatFromTheFirstToTheLast() throws {
        // One pin and no `upgrade_to_tls`: the initial load warns.
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: one-pin.example.com
                probe_interval: 0
                pins:
                  spki_sha256: [{pin: "\(String(repeating: "A", count: 43))="}]
            """, mainConfig: "log:\n  format: json\n")
        let policyFile = proxy.directory.file("etc/policies/test.yaml")
        // A reload that fails (the watcher sees the broken file within seconds).
        try proxy.directory.write("etc/policies/test.yaml", "hosts: [\n")
        _ = try proxy.process.waitForOutput(timeout: 20) { $0.contains("policy reload failed") ? true : nil }
        proxy.process.stop()
        #expect(proxy.process.terminationStatus == 0)

        let lines = proxy.log.split(separator: "\n", omittingEmptySubsequences: true)
        let objects = lines.map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        for (line, object) in zip(lines, objects) {
            #expect(object != nil, "not a JSON object: \(line)")
        }
        let parsed = objects.compactMap { $0 }
        // The initial load's warnings: once each, as JSON.
        let warnings = parsed.filter { $0["level"] as? String == "warning" && ($0["message"] as? String)?.contains("no backup pin") == true }
        #expect(warnings.count == 1)
        #expect(warnings.first?["file"] as? String == policyFile)
        // The failed reload: an error line naming the file, and one per error with its place.
        let failed = parsed.first { $0["message"] as? String == "policy reload failed; the previous policy keeps serving" }
        #expect(failed?["level"] as? String == "error")
        #expect(failed?["files"] as? [String] == [policyFile])
        #expect(parsed.contains { $0["level"] as? String == "error" && $0["file"] as? String == policyFile && $0["line"] as? Int == 2 })
        // The admin listener is announced once, by pinproxy's line (Hummingbird's
        // own "Server started" would say it a second time; issue 28 item 19).
        let listening = parsed.filter { ($0["message"] as? String)?.contains("listening") == true && $0["logger"] as? String == "pinproxy.admin" }
        #expect(listening.map { $0["message"] as? String } == ["admin API listening"], "\(listening)")
        // SIGTERM (what `stop()` sends) is logged when it arrives, naming the signal.
        let shutdown = parsed.first { $0["message"] as? String == "shutdown requested: no longer accepting, draining connections" }
        #expect(shutdown?["signal"] as? String == "SIGTERM", "\(parsed.suffix(6))")
        #expect(parsed.last?["message"] as? String == "stopped")
    }
}
