import Foundation
import PinproxyTestSupport
import Testing

/// `concurrency: N` sets the number of event-loop threads serving connections.
@Suite("concurrency", .blockingWaits)
struct ConcurrencyTests {
    /// NIO names the threads of its shared event-loop group `NIO-SGLTN-N-#k`.
    static func eventLoopThreads(of pid: pid_t) throws -> Int {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            return name.hasPrefix("NIO-SGLTN-")
        }.count
    }

    @Test(arguments: [1, 3])
    func theEventLoopCountIsTheSetting(loops: Int) throws {
        let proxy = try ProxyHarness(policies: "hosts: []\n", mainConfig: "concurrency: \(loops)\n")
        #expect(try Self.eventLoopThreads(of: proxy.process.pid) == loops)
    }
}
