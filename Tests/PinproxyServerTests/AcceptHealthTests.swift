import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import PinproxyServer

/// The listener's accept errors as `/readyz` sees them: only running out of
/// resources counts, and only for a while.
@Suite("Accept health")
struct AcceptHealthTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func outOfDescriptorsOnTheListenerIsNotAccepting() throws {
        let health = AcceptHealth()
        let channel = EmbeddedChannel(handler: AcceptErrorMonitor(health: health, logger: Self.quiet))
        defer { _ = try? channel.finish() }
        // One client's aborted handshake is not the listener's problem.
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNABORTED, reason: "accept"))
        #expect(health.isAccepting())
        channel.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept"))
        #expect(!health.isAccepting())
        #expect(health.recentFailure()?.reason.hasPrefix("EMFILE") == true)
        // The error goes on down the pipeline (to NIO's accept backoff).
        #expect(throws: IOError.self) { try channel.throwIfErrorCaught() }
    }

    @Test func aFailureCountsForTheWindowOnly() {
        let health = AcceptHealth()
        let start = NIODeadline.now()
        #expect(health.record("ENFILE", at: start))
        #expect(!health.record("ENFILE", at: start + .seconds(1)), "a burst logs once")
        #expect(!health.isAccepting(now: start + .seconds(5)))
        #expect(health.isAccepting(now: start + .seconds(1) + AcceptHealth.window + .milliseconds(1)))
    }
}
