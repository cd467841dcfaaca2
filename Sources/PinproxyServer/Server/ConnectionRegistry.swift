import NIOConcurrencyHelpers
import NIOCore

/// The open client connections: their count feeds the memory return after a
/// burst, and at the end of a drain whatever `limits.shutdown_grace`
/// (docs/contract.md §3) left open is cut off from here. Telling connections
/// to finish and waiting for them is NIO's `ServerQuiescingHelper` (see
/// `ProxyServer.run`), not this type.
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

    /// Closes every connection still open; returns how many that was.
    func closeAll() -> Int {
        let remaining = channels.withLockedValue { Array($0.values) }
        for channel in remaining { channel.close(promise: nil) }
        return remaining.count
    }
}
