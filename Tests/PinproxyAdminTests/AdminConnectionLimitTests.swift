import Foundation
import PinproxyPolicy
import PinproxyAdmin
import PinproxyTestSupport
import Testing

/// Idle and slow clients cannot hold the admin listener's sockets: an idle
/// connection and a head trickled byte by byte are closed after the idle
/// timeout, and past the connection cap the listener stops accepting.
@Suite("Admin listener limits")
struct AdminConnectionLimitTests {
    static let providers = AdminServer.Providers(readiness: { ReadinessStatus(listening: true, policyLoaded: true, caUsable: true) })
    static let request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"

    /// Raw sockets are waited on from a thread of their own: blocking on the
    /// cooperative pool would starve the server under test, and on NIO's
    /// thread pool the admin API's own reloads in other tests.
    struct Socket: @unchecked Sendable {
        let client: RawClient
        init(_ port: Int) throws { client = try RawClient(port: port) }
    }

    func blocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await onOwnThread(body)
    }

    func store() throws -> PolicyStore {
        try AdminFixture(policies: "hosts: []\n").store()
    }

    @Test func anIdleConnectionIsClosed() async throws {
        let limits = AdminLimits(idleTimeout: .seconds(1))
        try await withAdminServer(store: try store(), providers: Self.providers, limits: limits) { client in
            let idle = try Socket(client.port), used = try Socket(client.port)
            used.client.send(Self.request)
            let head = await blocking { used.client.readResponse().head }
            #expect(head.hasPrefix("HTTP/1.1 200"))
            // Both: one that never sent a byte, one idle after its answer.
            let closed = await blocking { (idle.client.isClosedByPeer(within: 15), used.client.isClosedByPeer(within: 15)) }
            #expect(closed.0, "a connection that sent nothing was kept open")
            #expect(closed.1, "an idle keep-alive connection was kept open")
        }
    }

    @Test func aHeadTrickledByteByByteIsCut() async throws {
        let limits = AdminLimits(idleTimeout: .seconds(1))
        try await withAdminServer(store: try store(), providers: Self.providers, limits: limits) { client in
            let socket = try Socket(client.port)
            let cut = await blocking { () -> Bool in
                let slow = socket.client
                slow.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
                // A header line every 200 ms, for up to 15 s (a loaded machine
                // runs timers late): always busy, never done.
                for index in 0..<75 {
                    if slow.isClosedByPeer(within: 0.2) { return true }
                    if !slow.send("X-Slow-\(index): y\r\n") { return true }
                }
                return false
            }
            #expect(cut, "a head that never ends held its connection for 15 s")
        }
    }

    @Test func pastTheCapTheListenerStopsAcceptingUntilOneCloses() async throws {
        let limits = AdminLimits(idleTimeout: .seconds(30), maxConnections: 3)
        try await withAdminServer(store: try store(), providers: Self.providers, limits: limits) { client in
            let held = try (0..<3).map { _ in try Socket(client.port) }
            for connection in held {
                connection.client.send(Self.request)
                let head = await blocking { connection.client.readResponse().head }
                #expect(head.hasPrefix("HTTP/1.1 200"))
            }
            let extra = try Socket(client.port)  // the kernel's backlog takes it
            extra.client.send(Self.request)
            let early = await blocking { extra.client.hasData(within: 1.5) }
            #expect(!early, "a fourth connection was served past a cap of three")

            held[0].client.closeNow()
            let answer = await blocking { extra.client.hasData(within: 20) ? extra.client.readResponse().head : "" }
            #expect(answer.hasPrefix("HTTP/1.1 200"), "the waiting connection was not served once a slot freed: \(answer)")
        }
    }
}
