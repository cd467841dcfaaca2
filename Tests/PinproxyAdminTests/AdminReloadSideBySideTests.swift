import Foundation
import NIOCore
import PinproxyAdmin
import PinproxyTestSupport
import Testing

/// Reloads asked for side by side, as tests running in parallel ask for them:
/// more waiting clients than NIO's thread pool has threads (where a reload
/// runs) must not keep any reload from starting.
@Suite("Admin reloads side by side")
struct AdminReloadSideBySideTests {
    @Test func moreConcurrentReloadsThanPoolThreadsAllAnswer() async throws {
        let fixture = try AdminFixture(policies: "hosts: []\n")
        let callers = NIOSingletons.blockingPoolThreadCountSuggestion + 1
        let statuses = try await withAdminServer(store: try fixture.store(), providers: AdminEndpointTests.ready) { client in
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<callers { group.addTask { try await client.post("/reload").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
        }
        #expect(statuses == Array(repeating: 200, count: callers))
    }
}
