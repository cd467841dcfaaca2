import Foundation
import Logging
import PinproxyAdmin
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTestSupport
import ServiceLifecycle
import Testing

/// Binding: port 0 reports the real port; an address in use fails the
/// service with the address named, and `boundAddress` does not hang.
struct AdminServerLifecycleTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func portZeroReportsTheBoundPortAndABusyPortFails() async throws {
        let fixture = try AdminFixture(policies: "hosts: [{match: a.example.com, action: tunnel}]\n")
        let store = try fixture.store()
        let providers = AdminServer.Providers(readiness: { ReadinessStatus(listening: true, policyLoaded: true, caUsable: true) })
        let reported = AsyncStream<HostPort>.makeStream()
        let first = AdminServer(
            listen: HostPort(host: "127.0.0.1", port: 0), store: store, metrics: PinproxyMetrics(), providers: providers,
            logger: Self.quiet, onListening: { reported.continuation.yield($0) })
        let group = ServiceGroup(services: [first], logger: Self.quiet)
        let running = Task { try await group.run() }
        defer { running.cancel() }

        let address = try await first.boundAddress
        #expect(address.host == "127.0.0.1")
        #expect(address.port > 0)
        var iterator = reported.stream.makeAsyncIterator()
        #expect(await iterator.next() == address)

        // A second server on the same port cannot bind.
        let second = AdminServer(
            listen: address, store: store, metrics: PinproxyMetrics(), providers: providers, logger: Self.quiet)
        await #expect(throws: AdminServerError.self) { try await second.run() }
        await #expect(throws: AdminServerError.self) { _ = try await second.boundAddress }

        await group.triggerGracefulShutdown()
        try await running.value
    }
}
