import Synchronization

/// Whether an HTTP/1.1 upstream connection is parked: kept, between two
/// requests, by the exchange handler that used it last, rather than handed
/// back to the pool (`UpstreamPool.park`). An app connection's next request
/// then goes out on the same upstream connection without the pool's lock or
/// its bookkeeping, and on a connection whose TLS state and buffers are still
/// warm (issue 33: about a tenth of a keep-alive request's CPU, measured
/// with `bench/ab`).
///
/// To the pool a parked connection is leased: it counts against
/// `max_upstream_connections` and is lent to nobody else. But it is free,
/// and whoever takes it first has it: its handler, for its next request, or
/// the pool, for another request that would otherwise dial or wait (or to
/// close it, on a reload or at shutdown). `take` is that race's one winner.
/// A request never waits in line while a connection is parked: a handler
/// parks only when no request is looking for a connection, and a request
/// looks only after saying so (`UpstreamPool`'s `demand`); of the two, the
/// later sees the other.
///
/// An atomic flag rather than a lock: parking and taking back are one
/// atomic write each, twice a keep-alive request. Sequentially consistent,
/// as `UpstreamPool`'s `demand` is, for the handshake above.
final class UpstreamParking: Sendable {
    private let parked = Atomic(false)

    init() {}

    /// The handler that used the connection keeps it, free.
    func park() {
        parked.store(true, ordering: .sequentiallyConsistent)
    }

    /// Takes the connection if it is parked; true: the caller now holds it
    /// (it is no longer parked). False: somebody took it first, or it was
    /// never parked.
    func take() -> Bool {
        parked.exchange(false, ordering: .sequentiallyConsistent)
    }
}
