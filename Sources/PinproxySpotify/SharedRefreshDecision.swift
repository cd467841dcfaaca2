import Foundation
import PinproxyPolicy

/// What a replica does with the session's row once it holds its lock
/// (docs/contract.md §12). Pure: the clock's time comes in as `now`.
enum SharedRefreshDecision: Equatable {
    /// The row holds a usable token of a generation this replica does not
    /// have: take it, call nobody.
    case useStored
    /// Call the token endpoint; for flow `refresh_token` with this refresh token.
    case callAccounts(refreshToken: Secret?)
    /// Flow `refresh_token` with no refresh token in the row and none to seed it with.
    case needsLogin

    /// - Parameters:
    ///   - held: the store generation of the token this replica holds (0: none).
    ///   - invalidated: a generation an upstream 401 just invalidated here, if any.
    ///   - seed: the `refresh_token_file`'s token, used only while the row has none.
    static func decide(row: StoredSession, held: Int, invalidated: Int?, now: Date, refreshBefore: Duration,
                       flow: SpotifySession.Flow, seed: Secret?) -> SharedRefreshDecision {
        if usableToken(in: row, invalidated: invalidated, now: now, refreshBefore: refreshBefore), row.generation > held {
            return .useStored
        }
        switch flow {
        case .clientCredentials:
            return .callAccounts(refreshToken: nil)
        case .refreshToken:
            guard let token = row.refreshToken ?? seed else { return .needsLogin }
            return .callAccounts(refreshToken: token)
        }
    }

    /// A stored access token not invalidated and not past its soft deadline
    /// (the same deadline every replica computes, so they agree when to refresh).
    static func usableToken(in row: StoredSession, invalidated: Int?, now: Date, refreshBefore: Duration) -> Bool {
        guard row.accessToken != nil, let obtained = row.accessObtainedAt, let expires = row.accessExpiresAt,
              row.generation > 0, row.staleGeneration != row.generation, invalidated != row.generation else { return false }
        let soft = RefreshTiming.softDeadline(issuedAt: obtained, lifetime: expires.timeIntervalSince(obtained), refreshBefore: refreshBefore)
        return now < soft
    }

    /// The row after a grant: one generation on, the rotated refresh token
    /// (or the one just used, which may be the file's seed) stored with it.
    static func granted(_ row: StoredSession, accessToken: Secret, lifetime: TimeInterval, requestedAt: Date,
                        usedRefreshToken: Secret?, rotated: Secret?, now: Date) -> StoredSession {
        var next = row
        next.generation = row.generation + 1
        next.accessToken = accessToken
        next.accessObtainedAt = requestedAt
        next.accessExpiresAt = requestedAt.addingTimeInterval(lifetime)
        if let rotated {
            next.refreshToken = rotated
            next.refreshTokenIssuedAt = now
        } else if let usedRefreshToken, row.refreshToken == nil {
            next.refreshToken = usedRefreshToken  // the file's seed, now in the store
            next.refreshTokenIssuedAt = row.refreshTokenIssuedAt ?? now
        }
        return next
    }
}
