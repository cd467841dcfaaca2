import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Whether the proxy listener can accept. A bound listener whose `accept`
/// fails for lack of resources (out of file descriptors, buffers or memory)
/// serves nobody while `/healthz` and a bound socket say all is well; this
/// is what `/readyz` reads to say so.
public final class AcceptHealth: Sendable {
    /// How long after the last such failure the listener counts as not accepting.
    public static let window = TimeAmount.seconds(10)

    public struct Failure: Sendable, Hashable {
        public var at: NIODeadline
        /// `EMFILE`, `ENFILE`…: what `accept` said.
        public var reason: String
    }

    private let last = NIOLockedValueBox<Failure?>(nil)

    public init() {}

    /// Records a failed accept; true when it is the first within `window`
    /// (worth a log line; the rest of a burst is not).
    @discardableResult
    func record(_ reason: String, at now: NIODeadline = .now()) -> Bool {
        last.withLockedValue { last in
            let first = last.map { now - $0.at > Self.window } ?? true
            last = Failure(at: now, reason: reason)
            return first
        }
    }

    /// The last failure, if it was within `window` of `now`.
    public func recentFailure(now: NIODeadline = .now()) -> Failure? {
        last.withLockedValue { last in
            guard let last, now - last.at <= Self.window else { return nil }
            return last
        }
    }

    public func isAccepting(now: NIODeadline = .now()) -> Bool { recentFailure(now: now) == nil }

    /// `accept` errors that mean "out of resources", as opposed to one
    /// client's connection failing (ECONNABORTED), which NIO also reports.
    static func isResourceExhaustion(_ error: any Error) -> String? {
        guard let io = error as? IOError else { return nil }
        switch io.errnoCode {
        case EMFILE: return "EMFILE (the process's file descriptor limit)"
        case ENFILE: return "ENFILE (the system's file limit)"
        case ENOBUFS: return "ENOBUFS"
        case ENOMEM: return "ENOMEM"
        default: return nil
        }
    }
}

/// On the listener's own pipeline: records accept failures for lack of
/// resources. NIO's `AcceptBackoffHandler`, after it, pauses accepting for a
/// second after each, so a listener out of descriptors does not spin.
final class AcceptErrorMonitor: ChannelInboundHandler {
    typealias InboundIn = any Channel

    private let health: AcceptHealth
    private let logger: Logger

    init(health: AcceptHealth, logger: Logger) {
        self.health = health
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let reason = AcceptHealth.isResourceExhaustion(error), health.record(reason) {
            logger.error("the proxy listener cannot accept connections", metadata: [
                "error": "\(reason)", "hint": "raise the open-files limit (RLIMIT_NOFILE) or lower limits.max_client_connections",
            ])
        }
        context.fireErrorCaught(error)
    }
}
