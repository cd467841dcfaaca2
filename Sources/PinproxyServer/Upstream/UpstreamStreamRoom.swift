import Synchronization

/// Room for streams on an HTTP/2 upstream connection that the pool counts
/// as in use but that no stream fills: kept, between two streams, by the
/// intercepted session whose stream ended there (`SessionStreamRoom`), for
/// its next request, rather than handed back to the pool. The session's
/// next stream then opens on the same connection without the pool's lock,
/// its key lookups and its state machine, on the lease and again at the
/// end (issue 33: the largest piece of pinproxy's own work per h2 stream).
/// It is the HTTP/2 counterpart of `UpstreamParking`.
///
/// To the pool a kept room is a stream (`streaming(n)` counts it), so the
/// server's stream limit is never overrun. But it is free, and whoever
/// takes it first has it: a session, for its next stream, or the pool, for
/// a request that finds the connection full (or to count it ended, on
/// SETTINGS, GOAWAY, a reload or at shutdown). A room is kept only while
/// no request is looking for a connection (`UpstreamPool.keepStreamRoom`,
/// the same `demand` as parking).
///
/// An atomic count rather than a lock, as `UpstreamParking` is a flag.
final class UpstreamStreamRoom: Sendable {
    private let kept = Atomic(0)

    init() {}

    /// A stream ended and its room stays with the connection, free.
    func keep() {
        kept.add(1, ordering: .sequentiallyConsistent)
    }

    /// Takes one kept room; false: none is kept (somebody took the last first).
    func take() -> Bool {
        var count = kept.load(ordering: .sequentiallyConsistent)
        while count > 0 {
            let (exchanged, original) = kept.compareExchange(expected: count, desired: count - 1, ordering: .sequentiallyConsistent)
            if exchanged { return true }
            count = original
        }
        return false
    }

    /// Takes every kept room; how many there were.
    func takeAll() -> Int {
        kept.exchange(0, ordering: .sequentiallyConsistent)
    }
}
