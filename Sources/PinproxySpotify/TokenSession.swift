import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy

/// One `spotify.sessions` entry: a cached access token, refreshed through a
/// `TokenEndpoint` with one call in flight at most (docs/contract.md §7, §10).
///
/// A class rather than an actor so that `invalidate` and `status` are
/// synchronous for the proxy's event-loop code; all state sits behind one
/// lock in `SessionState`, whose transitions decide what to launch.
public final class TokenSession: Sendable {
    public let name: String
    let config: SpotifySession
    let endpoint: any TokenEndpoint
    let clock: @Sendable () -> Date
    let events: TokenSessionEvents
    let logger: Logger
    let credentials: SessionCredentials
    /// "Spotify …" for a `spotify.sessions` entry, "credential NAME" for a `credentials:` one.
    let wording: SessionWording
    /// A token call unanswered this long counts as a transient failure, so a
    /// hung connection cannot hold the single flight forever.
    let endpointTimeout: Duration
    let state = NIOLockedValueBox(SessionState())
    /// The store the replicas share (docs/contract.md §12); nil: this replica alone (§7).
    let shared: (any SharedSessionStore)?

    public convenience init(config: SpotifySession, endpoint: any TokenEndpoint, clock: @escaping @Sendable () -> Date = { Date() },
                            events: TokenSessionEvents = .none, logger: Logger, shared: (any SharedSessionStore)? = nil) {
        self.init(config: config, endpoint: endpoint, clock: clock, events: events, logger: logger, endpointTimeout: .seconds(30),
                  shared: shared)
    }

    init(config: SpotifySession, endpoint: any TokenEndpoint, clock: @escaping @Sendable () -> Date,
         events: TokenSessionEvents, logger: Logger, endpointTimeout: Duration, shared: (any SharedSessionStore)? = nil) {
        self.endpointTimeout = endpointTimeout
        self.shared = shared
        self.name = config.name
        self.config = config
        self.endpoint = endpoint
        self.clock = clock
        self.events = events
        var logger = logger
        self.wording = SessionWording(config)
        logger[metadataKey: wording.metadataKey] = "\(config.name)"
        self.logger = logger
        self.credentials = SessionCredentials(config: config)
        // With a store, the refresh token's age is the store's, learnt at the first read.
        if shared == nil, let issued = credentials.store?.modificationDate() {
            events.refreshTokenIssued(config.name, issued)
        }
    }

    /// A valid token; waits at most `timeout` (docs/contract.md §10 `spotify.token_timeout`),
    /// then throws `TokenError.timedOut`. A still-valid token past its soft
    /// deadline is returned at once while one background refresh runs.
    /// Configuration faults (`invalidClient`, `misconfigured`,
    /// `needsReauthorization`) fail at once without calling the accounts service.
    public func token(timeout: Duration) async throws -> AccessToken {
        probeFaultIfDue()
        let now = clock()
        let deadline = now.addingTimeInterval(timeout.timeInterval)
        let (fast, fastLaunch) = state.withLockedValue { state -> (SessionState.Admission, SessionState.Launch) in
            // Only decide here; a waiter registers below, with its continuation.
            var probe = state
            let result = probe.admit(now: now, deadline: deadline)
            if case .wait = result.0 { return result }
            state = probe
            return result
        }
        switch fast {
        case .serve(let token):
            launch(fastLaunch)
            return token
        case .fail(let error):
            throw error
        case .wait:
            return try await wait(timeout: timeout)
        }
    }

    /// `token(timeout:)` when it would answer at once with a token: the
    /// cached token while it is valid (a refresh it is due for is launched in
    /// the background, as there), else nil, and the caller asks
    /// `token(timeout:)`, which waits or fails as it always did. Called on
    /// the event loop for every request that carries this credential, so
    /// the common answer costs a lock, not a task and two thread hops. When
    /// a fault's credentials are due to be checked (they are files), it
    /// answers nil: `token(timeout:)` checks them, off the loop.
    public func tokenNow() -> AccessToken? {
        let now = clock()
        let served = state.withLockedValue { state -> (AccessToken, SessionState.Launch)? in
            guard !state.faultProbeDue(now: now) else { return nil }
            var probe = state
            // The deadline only matters to a caller that would wait: this one does not.
            guard case (.serve(let token), let launch) = probe.admit(now: now, deadline: now) else { return nil }
            state = probe
            return (token, launch)
        }
        guard let (token, launchNow) = served else { return nil }
        launch(launchNow)
        return token
    }

    /// The upstream answered 401 to a request sent with `generation`: if that
    /// is still the cached token, drop it so the next `token` refreshes
    /// (single flight). An older generation does nothing.
    public func invalidate(generation: Int) {
        let dropped = state.withLockedValue { state -> Bool in
            guard let cached = state.cached, cached.generation == generation else { return false }
            state.cached = nil
            // The next refresh marks it stale in the store, so other replicas refresh once (docs/contract.md §12).
            state.invalidatedStoreGeneration = cached.storeGeneration
            return true
        }
        if dropped {
            logger.info("\(wording.token()) invalidated after a 401", metadata: ["generation": "\(generation)"])
        } else {
            logger.debug("stale 401 ignored: a newer token is cached", metadata: ["generation": "\(generation)"])
        }
    }

    /// Starts fetching a token if none is cached, without waiting (at startup,
    /// so `/readyz` soon shows whether the credentials work).
    public func prefetch() {
        let now = clock()
        let launch = state.withLockedValue { state -> SessionState.Launch in
            state.validToken(at: now) == nil ? state.startIfIdle(now: now) : .none
        }
        self.launch(launch)
    }

    /// For `/readyz`: reasons are error codes and paths, never secrets.
    public var status: TokenSessionStatus {
        let now = clock()
        return state.withLockedValue { state in
            if let fault = state.fault { return fault.status }
            if state.validToken(at: now) != nil { return .ok }
            if let failure = state.lastFailure { return .unavailable(reason: failure) }
            return .noTokenYet
        }
    }

    // MARK: Waiting

    private func wait(timeout: Duration) async throws -> AccessToken {
        let id = state.withLockedValue { state -> Int in
            state.nextWaiterID += 1
            state.pendingWaiters.insert(state.nextWaiterID)
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AccessToken, any Error>) in
                let now = clock()
                let deadline = now.addingTimeInterval(timeout.timeInterval)
                let (admission, launch) = state.withLockedValue { state -> (SessionState.Admission, SessionState.Launch) in
                    state.pendingWaiters.remove(id)
                    if state.cancelledWaiters.remove(id) != nil { return (.fail(CancellationError()), .none) }
                    let result = state.admit(now: now, deadline: deadline)
                    if case .wait = result.0 {
                        state.waiters[id] = SessionState.Waiter(continuation: continuation, deadline: deadline, timeout: nil)
                    }
                    return result
                }
                switch admission {
                case .serve(let token): continuation.resume(returning: token)
                case .fail(let error): continuation.resume(throwing: error)
                case .wait: armTimeout(for: id, after: timeout)
                }
                self.launch(launch)
            }
        } onCancel: {
            self.finishWaiter(id, with: .failure(CancellationError()))
        }
    }

    private func armTimeout(for id: Int, after timeout: Duration) {
        // The timer holds the session strongly: it lives at most `timeout` and is
        // cancelled when its waiter is answered. (A weak capture would give the
        // session a side table whose only pointer hides in its refcount bits,
        // which LeakSanitizer reports as a leak at exit.)
        let timer = Task {
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            self.finishWaiter(id, with: .failure(TokenError.timedOut))
        }
        let stillWaiting = state.withLockedValue { state -> Bool in
            guard state.waiters[id] != nil else { return false }
            state.waiters[id]?.timeout = timer
            return true
        }
        if !stillWaiting { timer.cancel() }
    }

    private func finishWaiter(_ id: Int, with result: Result<AccessToken, any Error>) {
        let waiter = state.withLockedValue { state -> SessionState.Waiter? in
            if state.pendingWaiters.contains(id) {
                state.cancelledWaiters.insert(id)
                return nil
            }
            return state.waiters.removeValue(forKey: id)
        }
        guard let waiter else { return }
        waiter.timeout?.cancel()
        waiter.continuation.resume(with: result)
        if case .failure(TokenError.timedOut) = result {
            logger.debug("no \(wording.token()) within the timeout")
        }
    }

    func resume(_ waiters: [SessionState.Waiter], with result: Result<AccessToken, any Error>) {
        for waiter in waiters {
            waiter.timeout?.cancel()
            waiter.continuation.resume(with: result)
        }
    }

    // MARK: Faults

    /// While a fault stands, one caller a second rereads the credentials; when
    /// they changed (or, for `invalid_client`, a minute passed) one retry is allowed.
    private func probeFaultIfDue() {
        let now = clock()
        guard state.withLockedValue({ $0.claimFaultProbe(now: now) }) else { return }
        let fingerprint = credentials.fingerprint()
        if state.withLockedValue({ $0.applyFaultProbe(fingerprint: fingerprint, now: now) }) {
            logger.notice("\(wording.session) credentials changed or retry interval passed: one token request allowed")
        }
    }

    // MARK: Launching

    func launch(_ launch: SessionState.Launch) {
        switch launch {
        case .none:
            break
        case .refreshNow:
            Task { await self.refresh() }
        case .timer(let until):
            Task { await self.runTimer(until: until) }
        }
    }

    /// Sleeps until the injected clock reaches `until` (or the task is
    /// cancelled), in short slices so a test clock that jumps ahead is noticed promptly.
    func sleep(untilClock until: Date) async {
        while !Task.isCancelled {
            let remaining = until.timeIntervalSince(clock())
            if remaining <= 0 { return }
            try? await Task.sleep(for: .milliseconds(Int64(min(remaining, 0.25) * 1000) + 1))
        }
    }

    private func runTimer(until: Date) async {
        await sleep(untilClock: until)
        let now = clock()
        launch(state.withLockedValue { $0.timerFired(now: now) })
    }
}
