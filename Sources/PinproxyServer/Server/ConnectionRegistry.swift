import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The open client connections, for graceful shutdown (docs/contract.md §3
/// `limits.shutdown_grace`) and the `client_connections` gauge.
final class ConnectionRegistry: Sendable {
    private let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    /// Hears every change of the count, to give memory back after a burst.
    private let memory = MemoryReturn()

    func add(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let count = channels.withLockedValue { $0[id] = channel; return $0.count }
        memory.connectionsChanged(to: count, on: channel.eventLoop)
        channel.closeFuture.whenComplete { _ in
            let count = self.channels.withLockedValue { _ = $0.removeValue(forKey: id); return $0.count }
            self.memory.connectionsChanged(to: count, on: channel.eventLoop)
        }
    }

    var count: Int { channels.withLockedValue { $0.count } }

    /// Tells every connection to finish (idle ones close now), waits up to
    /// `grace` for them to go, then closes the rest; returns how many were cut off.
    func drain(grace: Duration) async -> Int {
        for channel in channels.withLockedValue({ Array($0.values) }) {
            channel.pipeline.fireUserInboundEventTriggered(ProxyShutdownEvent())
        }
        let deadline = ContinuousClock.now + grace
        while count > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        let remaining = channels.withLockedValue { Array($0.values) }
        for channel in remaining { channel.close(promise: nil) }
        return remaining.count
    }
}
