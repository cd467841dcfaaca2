import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy

/// One call to the token endpoint and what follows from its answer. Only
/// ever running once per session at a time (`SessionState.Refresh.running`).
extension TokenSession {
    func refresh() async {
        if let shared {
            await refreshShared(shared)
        } else {
            await refreshAlone()
        }
    }

    /// Without a store, or a `client_credentials` session whose store is unreachable.
    func refreshAlone() async {
        let fingerprint = credentials.fingerprint()
        let request: SessionCredentials.Request
        switch credentials.request() {
        case .success(let value):
            request = value
        case .failure(let problem):
            credentialProblem(problem, fingerprint: fingerprint)
            return
        }
        if let modified = request.refreshTokenFileModifiedAt {
            events.refreshTokenIssued(name, modified)
        }

        let requestedAt = clock()
        switch await ask(request) {
        case .answered(let response):
            let reply = TokenReply(response, now: clock())
            if case .granted(let grant) = reply {
                granted(grant, requestedAt: requestedAt)
            } else {
                handle(reply, status: response.status, fingerprint: fingerprint)
            }
        case .failed(let reason, let detail):
            transientFailure(reason, detail: detail, retryAfter: nil, result: .failure)
        }
    }

    func credentialProblem(_ problem: SessionCredentials.Problem, fingerprint: Int) {
        let error: TokenError
        switch problem.status {
        case .needsReauthorization(let reason): error = .needsReauthorization(reason: reason)
        case .misconfigured(let reason): error = .misconfigured(reason: reason)
        default: preconditionFailure("credential problem with status \(problem.status)")
        }
        logger.error("\(wording.session) cannot request a token: \(problem.status)")
        fault(problem.status, error, fingerprint: fingerprint, periodic: true, result: .failure)
    }

    enum Asked: Sendable {
        case answered(TokenEndpointResponse)
        case failed(reason: String, detail: String?)
    }

    /// One call to the token endpoint, its failures put in words.
    func ask(_ request: SessionCredentials.Request) async -> Asked {
        do {
            return .answered(try await callEndpoint(request))
        } catch is EndpointTimeout {
            return .failed(reason: "token endpoint did not answer within \(DurationText.format(endpointTimeout))", detail: nil)
        } catch {
            return .failed(reason: "token endpoint unreachable", detail: "\(error)")
        }
    }

    /// Every answer but a grant.
    func handle(_ reply: TokenReply, status: Int, fingerprint: Int) {
        switch reply {
        case .granted:
            preconditionFailure("handle(_:) is not given grants")
        case .rateLimited(let retryAfter):
            transientFailure("token endpoint rate limited (429)", detail: nil, retryAfter: retryAfter, result: .rateLimited)
        case .failed(let reason):
            transientFailure("token endpoint failed: \(reason)", detail: nil, retryAfter: nil, result: .failure)
        case .invalidClient:
            logger.error("\(wording.endpoint) rejected the client credentials (invalid_client): check client_id and the client secret; not retried until the secret changes or a minute passes",
                         metadata: ["status": "\(status)"])
            fault(.misconfigured(reason: "invalid_client"), .invalidClient, fingerprint: fingerprint, periodic: true, result: .invalidClient)
        case .invalidGrant:
            logger.error("\(wording.endpoint) refused the refresh token (invalid_grant): \(config.reauthorizeHint); the stored token is kept",
                         metadata: ["status": "\(status)"])
            // With a store, a login elsewhere changes no file here: look again once a minute.
            fault(.needsReauthorization(reason: "invalid_grant"), .needsReauthorization(reason: "invalid_grant"),
                  fingerprint: fingerprint, periodic: shared != nil, result: .invalidGrant,
                  retryInterval: shared != nil ? SessionState.sharedLoginRetryInterval : SessionState.misconfiguredRetryInterval)
        case .rejected(let code, let status):
            logger.error("\(wording.endpoint) refused the token request (\(code)): a configuration error, not retried until the credentials change or a minute passes",
                         metadata: ["status": "\(status)"])
            fault(.misconfigured(reason: code), .misconfigured(reason: code), fingerprint: fingerprint, periodic: true, result: .failure)
        }
    }

    private struct EndpointTimeout: Error {}

    /// The endpoint call, abandoned (and cancelled) after `endpointTimeout` of the injected clock.
    /// Not a task group: a group would wait for a child that ignores cancellation.
    func callEndpoint(_ request: SessionCredentials.Request) async throws -> TokenEndpointResponse {
        let endpoint = self.endpoint
        let timeout = endpointTimeout
        let pending = NIOLockedValueBox<CheckedContinuation<TokenEndpointResponse, any Error>?>(nil)
        let tasks = NIOLockedValueBox<(call: Task<Void, Never>?, timer: Task<Void, Never>?)>((nil, nil))
        @Sendable func finish(_ result: Result<TokenEndpointResponse, any Error>) {
            guard let continuation = pending.withLockedValue({ value in defer { value = nil }; return value }) else { return }
            let (call, timer) = tasks.withLockedValue { $0 }
            call?.cancel()
            timer?.cancel()
            continuation.resume(with: result)
        }
        let form = request.form
        let basicAuth = request.basicAuth
        return try await withCheckedThrowingContinuation { continuation in
            pending.withLockedValue { $0 = continuation }
            let call = Task {
                do { finish(.success(try await endpoint.requestToken(form: form, basicAuth: basicAuth))) } catch { finish(.failure(error)) }
            }
            // Measured on the injected clock, as the refresh timers are, so a
            // test abandons a hung call by advancing its clock, not by waiting.
            let deadline = self.clock().addingTimeInterval(TimeInterval(timeout.components.seconds)
                + TimeInterval(timeout.components.attoseconds) / 1e18)
            let timer = Task {
                await self.sleep(untilClock: deadline)
                if !Task.isCancelled { finish(.failure(EndpointTimeout())) }
            }
            tasks.withLockedValue { $0 = (call, timer) }
            // Either may have finished before the handles were stored.
            if pending.withLockedValue({ $0 == nil }) {
                call.cancel()
                timer.cancel()
            }
        }
    }

    func granted(_ grant: TokenReply.Grant, requestedAt: Date) {
        // Rotation: the new refresh token is on disk before the new access
        // token is used by anyone (docs/contract.md §7). A reply without one leaves the file alone.
        if let rotated = grant.refreshToken, config.flow == .refreshToken, let store = credentials.store {
            do {
                try store.replace(with: rotated)
                logger.info("\(wording.token("refresh")) rotated", metadata: ["file": "\(store.path)"])
            } catch {
                logger.error("could not store the rotated \(wording.token("refresh")); keeping it in memory until the next rotation",
                             metadata: ["file": "\(store.path)", "error": "\(error)"])
                events.refreshTokenStoreFailed(name)
            }
            events.refreshTokenIssued(name, clock())
        }
        let (token, waiters) = state.withLockedValue {
            $0.installed(token: grant.accessToken, lifetime: grant.lifetime, requestedAt: requestedAt, refreshBefore: config.refreshBefore)
        }
        logger.info("\(wording.token("access")) refreshed", metadata: [
            "generation": "\(token.generation)", "expires_in": "\(Int(grant.lifetime))", "waiters": "\(waiters.count)",
        ])
        events.refreshed(name, .success)
        events.tokenExpiry(name, token.expiresAt)
        resume(waiters, with: .success(token))
    }

    func fault(_ status: TokenSessionStatus, _ error: TokenError, fingerprint: Int, periodic: Bool, result: TokenRefreshOutcome,
               retryInterval: TimeInterval = SessionState.misconfiguredRetryInterval) {
        let now = clock()
        let fault = SessionState.Fault(status: status, error: error, fingerprint: fingerprint, at: now,
                                       retriesPeriodically: periodic, retryInterval: retryInterval,
                                       nextProbe: now.addingTimeInterval(SessionState.faultProbeInterval))
        let waiters = state.withLockedValue { $0.faulted(fault) }
        events.refreshed(name, result)
        resume(waiters, with: .failure(error))
    }

    func transientFailure(_ reason: String, detail: String?, retryAfter: Date?, result: TokenRefreshOutcome,
                          cap: TimeInterval = Backoff.cap) {
        let now = clock()
        let (launch, hopeless, backoff) = state.withLockedValue { $0.failed(reason: reason, now: now, retryAfter: retryAfter, cap: cap) }
        var metadata: Logger.Metadata = [
            "attempt": "\(backoff.attempt)",
            "retry_in_ms": "\(Int(max(0, backoff.notBefore.timeIntervalSince(now)) * 1000))",
        ]
        if let detail { metadata["error"] = "\(detail)" }
        if launch == .none { metadata["retry"] = "at the next request" }
        logger.warning("\(wording.token()) refresh failed: \(reason)", metadata: metadata)
        events.refreshed(name, result)
        if let until = backoff.rateLimitedUntil {
            resume(hopeless, with: .failure(TokenError.rateLimited(until: until)))
        }
        self.launch(launch)
    }
}
