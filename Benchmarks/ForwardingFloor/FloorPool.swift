// The floor's pool, for bench/run's `newconn` and `fullconn` cases: an
// upstream connection whose app connection closed between requests waits here
// for the next app connection to the same target. Without it each new app
// connection would also dial and handshake upstream, which pinproxy's pool
// spares it, and the floor would cost more than pinproxy instead of less.
// As little as that takes: no limit, no idle timeout (nginx closes what idles,
// and `take` skips what is closed), no health check.
import NIOCore

/// Idle upstream connections by target, on one event loop: touched only on
/// it (`NIOLoopBound` in `IdleUpstreamsByLoop` asserts so).
final class IdleUpstreams {
    private var idle: [String: [any Channel]] = [:]

    static func key(_ target: (host: String, port: Int)) -> String {
        "\(target.host):\(target.port)"
    }

    /// The newest idle connection to `key` that is still open, if any.
    func take(_ key: String) -> (any Channel)? {
        while let channel = idle[key]?.popLast() {
            if channel.isActive { return channel }
        }
        return nil
    }

    func put(_ channel: any Channel, for key: String) {
        idle[key, default: []].append(channel)
    }
}

/// A pool per event loop (one, or one per core with `--loops 0`): an app
/// connection takes and leaves upstream connections of its own loop, as
/// pinproxy's pool keeps a connection on the loop that dialled it.
struct IdleUpstreamsByLoop: Sendable {
    private let pools: [NIOLoopBound<IdleUpstreams>]

    init(_ pools: [NIOLoopBound<IdleUpstreams>]) {
        self.pools = pools
    }

    /// The pool of `loop`, the loop the caller runs on.
    func on(_ loop: any EventLoop) -> IdleUpstreams {
        // A linear search: at most one pool per core.
        pools.first { $0.eventLoop === loop }!.value
    }
}
