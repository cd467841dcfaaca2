import Foundation
import PinproxyPolicy

/// A session's mutable state, kept behind one lock. The transitions are
/// plain mutating functions that decide and say what to launch; the session
/// performs the launches (tasks, continuations) outside the lock.
struct SessionState {
    struct Cached {
        var token: Secret
        var generation: Int
        var expiresAt: Date
        /// The soft deadline: past it the token still serves while one refresh runs.
        var refreshAt: Date
        /// The store's generation of this token; nil when fetched without the store.
        var storeGeneration: Int? = nil

        var accessToken: AccessToken { AccessToken(value: token.reveal(), generation: generation, expiresAt: expiresAt) }
    }

    enum Refresh: Equatable {
        case idle
        /// One call to the token endpoint is under way (single flight).
        case running
        /// A timer starts the next call when the backoff's `notBefore` has passed.
        case scheduled
    }

    /// A refusal that retrying the same credentials cannot fix.
    struct Fault {
        var status: TokenSessionStatus
        var error: TokenError
        /// The credentials refused (`SessionCredentials.fingerprint()`).
        var fingerprint: Int
        var at: Date
        /// `invalid_client` and its kind are retried once a minute anyway
        /// (a secret may be fixed on the accounts side); `invalid_grant` only
        /// when the refresh-token file changes.
        var retriesPeriodically: Bool
        /// How long after the fault a periodic retry is allowed.
        var retryInterval: TimeInterval = SessionState.misconfiguredRetryInterval
        var nextProbe: Date
        /// A probe found changed credentials (or the minute passed): the
        /// next admission may start one call.
        var retryNow = false
    }

    struct Waiter {
        var continuation: CheckedContinuation<AccessToken, any Error>
        var deadline: Date
        var timeout: Task<Void, Never>?
    }

    enum Admission {
        case serve(AccessToken)
        case fail(any Error)
        case wait
    }

    enum Launch: Equatable {
        case none
        case refreshNow
        case timer(until: Date)
    }

    static let faultProbeInterval: TimeInterval = 1
    static let misconfiguredRetryInterval: TimeInterval = 60
    /// With a shared store, a login on another machine fixes a session without
    /// touching anything here; a retry then costs one store read and calls
    /// accounts only if the stored refresh token changed (docs/contract.md §12).
    static let sharedLoginRetryInterval: TimeInterval = 2

    var cached: Cached?
    var generation = 0
    /// The newest store generation this replica has held (docs/contract.md §12); 0: none.
    var heldStoreGeneration = 0
    /// A store generation an upstream 401 invalidated here, until the next token.
    var invalidatedStoreGeneration: Int?
    /// The refresh token accounts last refused (`invalid_grant`): not sent again.
    var refusedRefreshToken: Secret?
    /// A grant the store failed to commit (docs/contract.md §12): written at the
    /// next locked refresh if the row has not moved on meanwhile.
    var uncommittedGrant: StoredSession?
    var refresh = Refresh.idle
    var backoff: Backoff?
    var fault: Fault?
    /// The last transient failure since the last success, for `status`.
    var lastFailure: String?
    var waiters: [Int: Waiter] = [:]
    /// Waiter ids handed out whose continuation is not registered yet, and
    /// those among them cancelled meanwhile.
    var pendingWaiters: Set<Int> = []
    var cancelledWaiters: Set<Int> = []
    var nextWaiterID = 0

    func validToken(at now: Date) -> Cached? {
        guard let cached, now < cached.expiresAt else { return nil }
        return cached
    }

    /// A caller asks for a token at `now`, prepared to wait until `deadline`.
    mutating func admit(now: Date, deadline: Date) -> (Admission, Launch) {
        if let valid = validToken(at: now) {
            return (.serve(valid.accessToken), now >= valid.refreshAt ? startIfIdle(now: now) : .none)
        }
        if refresh != .running {
            if let fault, !fault.retryNow { return (.fail(fault.error), .none) }
            if let until = backoff?.rateLimitedUntil, until > deadline { return (.fail(TokenError.rateLimited(until: until)), .none) }
        }
        return (.wait, startIfIdle(now: now))
    }

    /// Starts a call, or its timer, unless one is already under way or a fault forbids it.
    mutating func startIfIdle(now: Date) -> Launch {
        guard refresh == .idle else { return .none }
        if fault != nil {
            guard fault!.retryNow else { return .none }
            fault!.retryNow = false
        }
        if let backoff, backoff.notBefore > now {
            refresh = .scheduled
            return .timer(until: backoff.notBefore)
        }
        refresh = .running
        return .refreshNow
    }

    /// The backoff timer fired: call now if anyone still needs a token.
    mutating func timerFired(now: Date) -> Launch {
        guard refresh == .scheduled else { return .none }
        if let backoff, backoff.notBefore > now { return .timer(until: backoff.notBefore) }
        let cachedNeedsRefresh = validToken(at: now).map { now >= $0.refreshAt } ?? false
        guard !waiters.isEmpty || cachedNeedsRefresh else {
            refresh = .idle  // nobody is asking: the next caller starts it (backoff kept)
            return .none
        }
        refresh = .running
        return .refreshNow
    }

    /// Whether a fault's credentials are due to be checked (at most once a second).
    func faultProbeDue(now: Date) -> Bool {
        guard let fault, !fault.retryNow else { return false }
        return now >= fault.nextProbe
    }

    /// Whether a caller should check the fault's credentials now, claiming the check.
    mutating func claimFaultProbe(now: Date) -> Bool {
        guard faultProbeDue(now: now), var fault else { return false }
        fault.nextProbe = now.addingTimeInterval(Self.faultProbeInterval)
        self.fault = fault
        return true
    }

    /// The probe's result: true when the next admission may retry.
    mutating func applyFaultProbe(fingerprint: Int, now: Date) -> Bool {
        guard var fault else { return false }
        let changed = fingerprint != fault.fingerprint
        let due = fault.retriesPeriodically && now >= fault.at.addingTimeInterval(fault.retryInterval)
        guard changed || due else { return false }
        fault.retryNow = true
        self.fault = fault
        return true
    }

    /// A new token arrived: cache it, forget failures, hand it to every waiter.
    mutating func installed(token: Secret, lifetime: TimeInterval, requestedAt: Date, refreshBefore: Duration,
                            storeGeneration: Int? = nil) -> (AccessToken, [Waiter]) {
        generation += 1
        let expiresAt = requestedAt.addingTimeInterval(lifetime)
        let cached = Cached(token: token, generation: generation, expiresAt: expiresAt,
                            refreshAt: RefreshTiming.softDeadline(issuedAt: requestedAt, lifetime: lifetime, refreshBefore: refreshBefore),
                            storeGeneration: storeGeneration)
        if let storeGeneration { heldStoreGeneration = max(heldStoreGeneration, storeGeneration) }
        invalidatedStoreGeneration = nil
        self.cached = cached
        backoff = nil
        fault = nil
        lastFailure = nil
        refresh = .idle
        return (cached.accessToken, takeWaiters { _ in true })
    }

    /// A refusal retrying cannot fix: fail every waiter now; the cached token
    /// (if still valid) keeps serving.
    mutating func faulted(_ fault: Fault) -> [Waiter] {
        self.fault = fault
        backoff = nil
        lastFailure = nil
        refresh = .idle
        return takeWaiters { _ in true }
    }

    /// A transient failure: back off; keep trying while someone needs a token.
    /// Returns the waiters whose deadline ends before a `Retry-After` (failed at once).
    mutating func failed(reason: String, now: Date, retryAfter: Date?, cap: TimeInterval = Backoff.cap,
                         random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) -> (Launch, [Waiter], Backoff) {
        let next = Backoff.after(backoff, now: now, retryAfter: retryAfter, cap: cap, random: random)
        backoff = next
        fault = nil  // a retry after a fault met a transient failure: we no longer know
        lastFailure = reason
        let hopeless = next.rateLimitedUntil.map { until in takeWaiters { $0.deadline < until } } ?? []
        let cachedNeedsRefresh = validToken(at: now) != nil
        if !waiters.isEmpty || cachedNeedsRefresh {
            refresh = .scheduled
            return (.timer(until: next.notBefore), hopeless, next)
        }
        refresh = .idle
        return (.none, hopeless, next)
    }

    private mutating func takeWaiters(where predicate: (Waiter) -> Bool) -> [Waiter] {
        var taken: [Waiter] = []
        for (id, waiter) in waiters where predicate(waiter) {
            taken.append(waiter)
            waiters[id] = nil
        }
        return taken
    }
}
