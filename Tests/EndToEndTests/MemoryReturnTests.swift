import Foundation
import PinproxyTestSupport
import Testing

/// After a burst of client connections drains, pinproxy hands the memory
/// malloc kept back to the system (measured figures: docs/operations.md).
@Suite("Memory after a burst", .blockingWaits)
struct MemoryReturnTests {
    @Test func aDrainedBurstIsFollowedByATrim() throws {
        // The idle clients must stay open until the test closes them: with the
        // default header_timeout (10 s), opening 300 of them on a loaded machine
        // could outlast it, and the proxy would drain the burst on its own.
        let proxy = try ProxyHarness(policies: "hosts: []\n", mainConfig: "limits:\n  header_timeout: 10m\n  idle_timeout: 10m\n")
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        // The last scrape, for the failure message: what the gauge said, or why there was no answer.
        var last = "no scrape yet"
        func open() throws -> Double? {
            let scrape = try Curl.run("\(admin)/metrics", proxyURL: nil, caFile: nil, directory: proxy.directory)
            let value = try? PrometheusText(parsing: scrape.body).value("pinproxy_client_connections")
            last = "status \(scrape.status), curl exit \(scrape.exitCode) \(scrape.stderr), client_connections \(value.map { "\($0)" } ?? "absent")"
            return value
        }
        // Idle connections are client connections too; 300 is above the burst threshold (256).
        var clients: [RawClient] = []
        for _ in 0..<300 { clients.append(try RawClient(port: proxy.port)) }
        #expect(try pollUntilBlocking(timeout: 20, every: 0.1) { try open() == 300 }, "\(last)")
        #expect(!proxy.log.contains("returned freed memory"), "no trim while the burst is open")
        clients.forEach { $0.closeNow() }
        #expect(try pollUntilBlocking(timeout: 20, every: 0.1) { try open() == 0 }, "\(last)")
        let line = try proxy.process.waitForOutput(timeout: 20) { output in
            output.split(separator: "\n").first { $0.contains("returned freed memory to the system after a burst") }.map(String.init)
        }
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(fields["peak_connections"] as? Int == 300)
        #expect(fields["resident_mib_after"] is Int)
    }
}
