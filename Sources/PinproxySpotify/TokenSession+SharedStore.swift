import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy

/// A refresh through the store the replicas share (docs/contract.md §12): read
/// the row; if it holds a newer usable token, take it; otherwise lock the row,
/// decide again under the lock, and call the token endpoint only if no other
/// replica got there first. The new tokens are committed before anyone uses them.
extension TokenSession {
    /// How a refresh under the row lock ended.
    enum SharedOutcome: Sendable {
        case stored(StoredSession)
        case granted(StoredSession)
        case reply(TokenReply, status: Int, usedRefreshToken: Secret?)
        case endpointFailed(reason: String, detail: String?)
        case credentials(SessionCredentials.Problem)
        case needsLogin
    }

    /// An unreachable store fails fast: retry it soon rather than after a minute.
    static let storeRetryCap: TimeInterval = 2

    func refreshShared(_ shared: any SharedSessionStore) async {
        let (held, invalidated, refused, pending) = state.withLockedValue {
            ($0.heldStoreGeneration, $0.invalidatedStoreGeneration, $0.refusedRefreshToken, $0.uncommittedGrant)
        }
        let refreshBefore = config.refreshBefore
        // Most refreshes end here: another replica already wrote the next generation.
        do {
            if let row = try await shared.load(session: name),
               SharedRefreshDecision.usableToken(in: row, invalidated: invalidated, now: clock(), refreshBefore: refreshBefore),
               row.generation > held {
                installStored(row)
                return
            }
        } catch {
            await storeUnreachable(error)
            return
        }

        let fingerprint = credentials.fingerprint()
        let flow = config.flow
        // The file seeds the store once, while the row holds no refresh token.
        let seed: Secret? = flow == .refreshToken ? (try? credentials.store?.load().get())?.token : nil
        let grantOutsideStore = NIOLockedValueBox<StoredSession?>(nil)
        let outcome: SharedOutcome
        do {
            outcome = try await shared.withLockedSession(session: name) { stored in
                // A grant whose commit failed last time is the newest state if nobody wrote since:
                // it holds the only refresh token accounts still accepts after a rotation.
                var row = stored
                if let pending, pending.generation == stored.generation + 1 { row = pending }
                let now = self.clock()
                var decision = SharedRefreshDecision.decide(row: row, held: held, invalidated: invalidated, now: now,
                                                            refreshBefore: refreshBefore, flow: flow, seed: seed)
                if case .callAccounts(let token?) = decision, token == refused { decision = .needsLogin }
                // A 401 here invalidates the generation for every replica, even if the call below fails.
                var marked = row
                if let invalidated, invalidated == row.generation, row.staleGeneration != invalidated {
                    marked.staleGeneration = invalidated
                }
                let markWrite = marked == stored ? nil : marked
                switch decision {
                case .useStored:
                    return (markWrite, .stored(row))
                case .needsLogin:
                    return (markWrite, .needsLogin)
                case .callAccounts(let refreshToken):
                    let request: SessionCredentials.Request
                    switch self.credentials.request(refreshToken: refreshToken) {
                    case .success(let value): request = value
                    case .failure(let problem): return (markWrite, .credentials(problem))
                    }
                    let requestedAt = self.clock()
                    switch await self.ask(request) {
                    case .failed(let reason, let detail):
                        return (markWrite, .endpointFailed(reason: reason, detail: detail))
                    case .answered(let response):
                        let reply = TokenReply(response, now: self.clock())
                        guard case .granted(let grant) = reply else {
                            return (markWrite, .reply(reply, status: response.status, usedRefreshToken: refreshToken))
                        }
                        let next = SharedRefreshDecision.granted(
                            marked, accessToken: grant.accessToken, lifetime: grant.lifetime, requestedAt: requestedAt,
                            usedRefreshToken: refreshToken, rotated: flow == .refreshToken ? grant.refreshToken : nil, now: self.clock())
                        grantOutsideStore.withLockedValue { $0 = next }
                        return (next, .granted(next))
                    }
                }
            }
        } catch {
            if let orphan = grantOutsideStore.withLockedValue({ $0 }) {
                // Granted but not committed: the access token is good here; a rotated
                // refresh token is lost with the transaction (the session may need a login).
                logger.error("\(wording.token()) granted but the session store failed before it was committed: serving it on this replica, and writing it at the next refresh if nobody wrote since",
                             metadata: ["error": "\(error)"])
                state.withLockedValue { $0.uncommittedGrant = orphan }
                events.refreshed(name, .success)
                install(orphan, storeGeneration: nil)
                return
            }
            await storeUnreachable(error)
            return
        }
        state.withLockedValue { $0.uncommittedGrant = nil }  // written, or overtaken by another replica's write
        switch outcome {
        case .stored(let row):
            installStored(row)
        case .granted(let row):
            logger.info("\(wording.token("access")) refreshed through the session store", metadata: ["store_generation": "\(row.generation)"])
            events.refreshed(name, .success)
            installStored(row)
        case .reply(let reply, let status, let used):
            if case .invalidGrant = reply, let used { state.withLockedValue { $0.refusedRefreshToken = used } }
            handle(reply, status: status, fingerprint: fingerprint)
        case .endpointFailed(let reason, let detail):
            transientFailure(reason, detail: detail, retryAfter: nil, result: .failure)
        case .credentials(let problem):
            credentialProblem(problem, fingerprint: fingerprint)
        case .needsLogin:
            let reason = "no usable refresh token in the session store; \(config.reauthorizeHint)"
            logger.error("\(wording.session) cannot refresh: \(reason)")
            // Periodic: a login on another machine writes the store, not a file this replica could watch.
            fault(.needsReauthorization(reason: "no refresh token in the store"), .needsReauthorization(reason: reason),
                  fingerprint: fingerprint, periodic: true, result: .failure, retryInterval: SessionState.sharedLoginRetryInterval)
        }
    }

    /// The store could not be reached: a `refresh_token` session waits for it
    /// (refreshing alone would fork the rotation); a `client_credentials`
    /// session fetches its own token (docs/contract.md §12).
    private func storeUnreachable(_ error: any Error) async {
        switch config.flow {
        case .clientCredentials:
            logger.warning("session store unreachable: fetching this replica's own token", metadata: ["error": "\(error)"])
            await refreshAlone()
        case .refreshToken:
            transientFailure("session store unreachable", detail: "\(error)", retryAfter: nil, result: .failure, cap: Self.storeRetryCap)
        }
    }

    func installStored(_ row: StoredSession) {
        if let issued = row.refreshTokenIssuedAt { events.refreshTokenIssued(name, issued) }
        install(row, storeGeneration: row.generation)
    }

    private func install(_ row: StoredSession, storeGeneration: Int?) {
        guard let token = row.accessToken, let obtained = row.accessObtainedAt, let expires = row.accessExpiresAt else {
            preconditionFailure("install(_:) needs a row with an access token")
        }
        let (installed, waiters) = state.withLockedValue {
            $0.installed(token: token, lifetime: expires.timeIntervalSince(obtained), requestedAt: obtained,
                         refreshBefore: config.refreshBefore, storeGeneration: storeGeneration)
        }
        logger.debug("\(wording.token("access")) from the session store", metadata: [
            "generation": "\(installed.generation)", "store_generation": "\(storeGeneration.map(String.init) ?? "none")",
            "waiters": "\(waiters.count)",
        ])
        events.tokenExpiry(name, installed.expiresAt)
        resume(waiters, with: .success(installed))
    }
}
