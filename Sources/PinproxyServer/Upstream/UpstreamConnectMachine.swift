import NIOCore
import PinproxyPolicy

/// The decisions of one upstream dial, with no I/O: resolve and guard (inside
/// the dial, by `GuardedResolver`) → TCP (Happy Eyeballs) to a target or the
/// parent proxy → parent CONNECT (optional) → the connection's own layers →
/// TLS and the pin verdict (optional). `UpstreamConnectDriver` carries out the
/// actions and feeds back what happened. Every path ends in exactly one
/// `.succeed` or `.fail`, after which every event is ignored, so the driver's
/// promise is completed once and a failure is always one `ProxyError`.
struct UpstreamConnectMachine {
    /// What the machine needs to know of the plan.
    struct Config {
        var host: String
        /// Tried in order; the whole list again up to `retries` times.
        var targets: [HostPort]
        var retries: Int
        /// The parent proxy dialled instead of each target (`upstream_proxy:`), as text for refusals.
        var parent: String?
        /// The connection's layers report a handshake (TLS and pin verdict, or
        /// plain HTTP's "ready") that must come before the connection is handed out.
        var awaitsHandshake: Bool
        var connectTimeout: TimeAmount
        var handshakeTimeout: TimeAmount
    }

    /// The stages a timer guards. A timer of a stage already left is stale and ignored.
    enum Stage: Equatable, Sendable {
        case parentConnect
        case handshake
    }

    /// Which target of which round is being tried, and why the last one failed.
    struct Attempt {
        var round: Int
        var index: Int
        var lastError: ProxyError?
    }

    enum State {
        case idle
        /// TCP to the target (or to the parent), through the SSRF guard.
        case dialling(Attempt)
        /// CONNECT sent to the parent; its answer head awaited.
        case parentConnect(Attempt)
        /// The connection's layers are being installed (synchronous, in the driver).
        case installing
        /// TLS handshake and pin verdict.
        case handshaking
        case done
    }

    enum Event {
        case start
        /// TCP connected (to the target, or to the parent).
        case dialled
        /// The dial failed: the guard's refusal, a timeout or `connect_failed`.
        case dialFailed(ProxyError)
        case parentAnswered
        /// The parent refused, closed mid-head, or answered something else.
        case parentFailed(ProxyError)
        case installed
        case installFailed(ProxyError)
        case handshakeCompleted
        /// The handshake failed, or the pin verdict refused the chain.
        case handshakeFailed(ProxyError)
        case timedOut(Stage)
    }

    enum Action {
        /// Dial `target` (or the parent, which is then asked for `target`).
        case dial(HostPort)
        /// Close the channel the driver holds (a failed parent leg before the next dial).
        case close
        /// Close the channel a late `.dialled` brought: the machine is past it.
        case discardNewChannel
        case sendParentConnect(HostPort)
        case install
        case scheduleTimeout(Stage, TimeAmount)
        /// Hand the connection out: the one success.
        case succeed
        /// Close whatever is open and fail with this refusal: the one failure.
        case fail(ProxyError)
    }

    let config: Config
    private(set) var state = State.idle

    init(_ config: Config) {
        self.config = config
    }

    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    mutating func handle(_ event: Event) -> [Action] {
        switch (state, event) {
        case (.idle, .start):
            return next(after: Attempt(round: 0, index: -1, lastError: nil))

        case (.dialling(let attempt), .dialled):
            guard config.parent != nil else { return install() }
            state = .parentConnect(attempt)
            return [.sendParentConnect(config.targets[attempt.index]), .scheduleTimeout(.parentConnect, config.connectTimeout)]
        case (.dialling(let attempt), .dialFailed(let error)):
            return retry(attempt, after: error, close: false)

        case (.parentConnect, .parentAnswered):
            return install()
        case (.parentConnect(let attempt), .parentFailed(let error)):
            return retry(attempt, after: error, close: true)
        case (.parentConnect(let attempt), .timedOut(.parentConnect)):
            let target = config.targets[attempt.index]
            return retry(attempt, after: ProxyError(.upstreamTimeout, host: config.host, detail:
                "parent proxy \(config.parent ?? "") did not answer CONNECT \(target) within \(config.connectTimeout.seconds) s"), close: true)

        case (.installing, .installed):
            guard config.awaitsHandshake else { return finish(.succeed) }
            state = .handshaking
            return [.scheduleTimeout(.handshake, config.handshakeTimeout)]
        case (.installing, .installFailed(let error)):
            return finish(.fail(error))

        case (.handshaking, .handshakeCompleted):
            return finish(.succeed)
        case (.handshaking, .handshakeFailed(let error)):
            return finish(.fail(error))
        case (.handshaking, .timedOut(.handshake)):
            return finish(.fail(ProxyError(.upstreamTimeout, host: config.host,
                                           detail: "TLS handshake with \(config.host) took longer than \(config.handshakeTimeout.seconds) s")))

        case (_, .dialled):
            // Only reached by a channel that arrives where none is expected: it is closed, never used.
            return [.discardNewChannel]

        case (.idle, _), (.dialling, _), (.parentConnect, _), (.installing, _), (.handshaking, _), (.done, _):
            // Late or stale: a timer of a stage already left, a second answer,
            // anything after the promise was completed. Nothing to do.
            return []
        }
    }

    private mutating func install() -> [Action] {
        state = .installing
        return [.install]
    }

    private mutating func finish(_ action: Action) -> [Action] {
        state = .done
        return [action]
    }

    /// A failed dial or parent leg: the guard's refusal is final; anything
    /// else moves on to the next target, then the next round.
    private mutating func retry(_ attempt: Attempt, after error: ProxyError, close: Bool) -> [Action] {
        let cleanup: [Action] = close ? [.close] : []
        if error.code == .ssrfBlocked { return cleanup + finish(.fail(error)) }
        var attempt = attempt
        attempt.lastError = error
        return cleanup + next(after: attempt)
    }

    private mutating func next(after attempt: Attempt) -> [Action] {
        var attempt = attempt
        attempt.index += 1
        if attempt.index >= config.targets.count {
            attempt.index = 0
            attempt.round += 1
        }
        guard attempt.round <= max(0, config.retries), !config.targets.isEmpty else {
            return finish(.fail(attempt.lastError ?? ProxyError(.connectFailed, host: config.host, detail: "no upstream address to dial")))
        }
        state = .dialling(attempt)
        return [.dial(config.targets[attempt.index])]
    }
}
