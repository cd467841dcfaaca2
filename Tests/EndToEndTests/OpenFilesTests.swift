import Foundation
import PinproxyTestSupport
import Testing

/// File descriptors: `run` raises its soft limit to the hard one, and when
/// the proxy listener still runs out, `/readyz` says it cannot accept.
@Suite("Open files: the limit at start, and readiness when accept fails", .blockingWaits, .serialized)
struct OpenFilesTests {
    static func hardLimit() -> UInt64 {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return UInt64(limit.rlim_max)
    }

    /// (soft, hard) "Max open files" of a running process.
    static func openFilesLimit(pid: pid_t) throws -> (String, String) {
        let text = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let fields = line.dropFirst("Max open files".count).split(separator: " ")
        return (String(fields[0]), String(fields[1]))
    }

    @Test func runRaisesTheSoftLimitToTheHardLimitAndLogsBoth() throws {
        let hard = Self.hardLimit()
        try #require(hard > 256, "the test needs a hard limit above 256")
        let proxy = try ProxyHarness(policies: "hosts: []\n", launcher: ["prlimit", "--nofile=256:\(hard)"])
        let limits = try Self.openFilesLimit(pid: proxy.process.pid)
        #expect(limits.0 == limits.1, "soft \(limits.0), hard \(limits.1)")
        let line = proxy.log.split(separator: "\n").first { $0.contains("\"open files limit\"") }
        #expect(line?.contains("\"soft_at_start\":\"256\"") == true, "\(line ?? "no log line")")
        #expect(line?.contains("\"soft\":\"\(limits.0)\"") == true, "\(line ?? "")")
    }

    @Test func readyzSaysWhenTheProxyListenerCannotAccept() throws {
        // A hard limit of 96: nothing to raise, and soon exhausted.
        let proxy = try ProxyHarness(policies: "hosts: []\n", launcher: ["prlimit", "--nofile=96:96"])
        let admin = try RawClient(port: try proxy.adminPort)  // opened while descriptors remain
        admin.send("GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(admin.readResponse().head.hasPrefix("HTTP/1.1 200"))

        // More clients than the process has descriptors left: the kernel
        // completes every handshake, pinproxy's accept runs out.
        let clients = try (0..<120).map { _ in try RawClient(port: proxy.port) }
        let logged = (try? proxy.process.waitForOutput(timeout: 10) { $0.contains("the proxy listener cannot accept connections") ? true : nil }) != nil
        #expect(logged, "the failed accepts were not logged")
        admin.send("GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        let (head, body) = admin.readResponse()
        #expect(head.hasPrefix("HTTP/1.1 503"), "\(head)")
        #expect(body.contains("\"missing\":[\"accepting\"]"), "\(body)")
        #expect(body.contains("the proxy listener cannot accept connections: EMFILE"), "\(body)")
        clients.forEach { $0.closeNow() }
    }
}
