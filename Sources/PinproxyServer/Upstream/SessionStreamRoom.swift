import NIOCore

/// The HTTP/2 upstream connection on which an intercepted session keeps the
/// room of its ended streams (`UpstreamStreamRoom`), and gives it back. One
/// per session, shared by its requests: an HTTP/1.1 app connection's, one
/// after another, or an HTTP/2 app connection's streams, side by side (each
/// has its own exchange handler, so a handler could keep nothing from one
/// stream to the next). Used only on the session's event loop.
///
/// The session remembers one connection, the first its streams ended on;
/// a stream that ended on another is released to the pool as before.
/// Every room kept on a connection was kept by a session that remembers
/// it, and a session that forgets it gives back all the room kept there
/// (some another session kept, which then finds none and asks the pool):
/// so no room outlives the sessions that could take it.
final class SessionStreamRoom: @unchecked Sendable {
    private var connection: UpstreamConnection?
    /// When a room was last kept: the connection's idle time in the pool
    /// counts from then when the room comes back with the session's close.
    private var keptAt = NIODeadline.uptimeNanoseconds(0)
    /// Streams opened on kept room (tests).
    private(set) var taken = 0

    init() {}

    /// The connection to open a stream on for `key`, a room kept there taken
    /// (the pool counted it already); nil: ask the pool. A connection found
    /// closed or going away is forgotten, all its kept room given back in one
    /// pool event.
    func take(for key: UpstreamPool.Key, pool: UpstreamPool) -> UpstreamConnection? {
        guard let connection, connection.key == key else { return nil }
        guard connection.isActive, connection.multiplexer?.handler.goingAway == false else {
            giveBack(to: pool)
            return nil
        }
        guard connection.streamRoom?.take() == true else { return nil }
        taken += 1
        return connection
    }

    /// A request is done with `stream`: its room is kept on its connection
    /// if the pool lets it be (`UpstreamPool.keepStreamRoom`), else the
    /// stream is released.
    func keep(_ stream: UpstreamConnection, pool: UpstreamPool) {
        guard let parent = stream.parent, connection == nil || connection === parent else {
            pool.release(stream)
            return
        }
        guard pool.keepStreamRoom(stream) else { return }
        connection = parent
        keptAt = .now()
    }

    /// The session is over (or forgets its connection): the room kept on
    /// the connection returns to the pool, idle since it was last kept.
    func giveBack(to pool: UpstreamPool) {
        guard let connection else { return }
        self.connection = nil
        if let kept = connection.streamRoom?.takeAll(), kept > 0 {
            pool.streamEnded(on: connection, count: kept, now: keptAt)
        }
    }
}
