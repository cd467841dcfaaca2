import Foundation
import PinproxyPolicy
import Testing
@testable import PinproxySpotify

/// What a replica does once it holds the session's row lock (docs/contract.md §12).
/// Pure: the time comes in as an argument.
@Suite("Shared refresh decisions")
struct SharedRefreshDecisionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Obtained 10 minutes ago, lives an hour, so its soft deadline (refresh_before 5m) is 45 minutes ahead.
    static func row(generation: Int = 4, stale: Int = 0, obtainedAgo: TimeInterval = 600, lifetime: TimeInterval = 3600,
                    refresh: String? = "row-refresh") -> StoredSession {
        StoredSession(generation: generation, accessToken: Secret("access"), accessObtainedAt: now.addingTimeInterval(-obtainedAgo),
                      accessExpiresAt: now.addingTimeInterval(-obtainedAgo + lifetime), refreshToken: refresh.map(Secret.init),
                      refreshTokenIssuedAt: now.addingTimeInterval(-86_400), staleGeneration: stale)
    }

    static func decide(_ row: StoredSession, held: Int, invalidated: Int? = nil, flow: SpotifySession.Flow = .refreshToken,
                       seed: String? = nil) -> SharedRefreshDecision {
        .decide(row: row, held: held, invalidated: invalidated, now: now, refreshBefore: .seconds(300), flow: flow,
                seed: seed.map(Secret.init))
    }

    @Test func aNewerUsableGenerationIsTakenWithoutACall() {
        #expect(Self.decide(Self.row(generation: 4), held: 3) == .useStored)
        #expect(Self.decide(Self.row(generation: 4), held: 0) == .useStored, "a replica starting up takes the stored token")
    }

    @Test func theGenerationThisReplicaHoldsIsRefreshed() {
        #expect(Self.decide(Self.row(generation: 4), held: 4) == .callAccounts(refreshToken: Secret("row-refresh")))
        #expect(Self.decide(Self.row(generation: 4), held: 4, flow: .clientCredentials) == .callAccounts(refreshToken: nil))
    }

    @Test func aTokenPastItsSoftDeadlineIsNotTaken() {
        // Obtained 56 minutes ago: 4 minutes left, inside refresh_before (5 minutes).
        #expect(Self.decide(Self.row(generation: 9, obtainedAgo: 3360), held: 3) == .callAccounts(refreshToken: Secret("row-refresh")))
        // Short lifetimes: the lead is half the lifetime (docs/contract.md §10), so 4 s of 10 s is still usable, 6 s is not.
        #expect(Self.decide(Self.row(generation: 9, obtainedAgo: 4, lifetime: 10), held: 3) == .useStored)
        #expect(Self.decide(Self.row(generation: 9, obtainedAgo: 6, lifetime: 10), held: 3) != .useStored)
    }

    @Test func aGenerationA401InvalidatedIsNotTakenHereOrAnywhere() {
        #expect(Self.decide(Self.row(generation: 4), held: 3, invalidated: 4) == .callAccounts(refreshToken: Secret("row-refresh")))
        #expect(Self.decide(Self.row(generation: 4, stale: 4), held: 3) == .callAccounts(refreshToken: Secret("row-refresh")),
                "marked stale in the row by another replica")
        #expect(Self.decide(Self.row(generation: 5, stale: 4), held: 4, invalidated: 4) == .useStored,
                "another replica already replaced the invalidated generation")
    }

    @Test func theFileSeedsOnlyAnEmptyRow() {
        #expect(Self.decide(Self.row(refresh: nil), held: 4, seed: "file-refresh") == .callAccounts(refreshToken: Secret("file-refresh")))
        #expect(Self.decide(Self.row(), held: 4, seed: "file-refresh") == .callAccounts(refreshToken: Secret("row-refresh")))
        #expect(Self.decide(StoredSession(), held: 0, seed: nil) == .needsLogin)
    }

    @Test func aGrantAdvancesTheGenerationAndStoresTheRotatedToken() {
        let row = Self.row(generation: 4, stale: 4)
        let next = SharedRefreshDecision.granted(row, accessToken: Secret("new-access"), lifetime: 3600, requestedAt: Self.now,
                                                 usedRefreshToken: Secret("row-refresh"), rotated: Secret("rotated"), now: Self.now)
        #expect(next.generation == 5)
        #expect(next.accessToken == Secret("new-access"))
        #expect(next.accessExpiresAt == Self.now.addingTimeInterval(3600))
        #expect(next.refreshToken == Secret("rotated"))
        #expect(next.refreshTokenIssuedAt == Self.now)
        #expect(SharedRefreshDecision.usableToken(in: next, invalidated: nil, now: Self.now, refreshBefore: .seconds(300)))

        let kept = SharedRefreshDecision.granted(row, accessToken: Secret("new-access"), lifetime: 3600, requestedAt: Self.now,
                                                 usedRefreshToken: Secret("row-refresh"), rotated: nil, now: Self.now)
        #expect(kept.refreshToken == Secret("row-refresh"))
        #expect(kept.refreshTokenIssuedAt == row.refreshTokenIssuedAt, "no rotation: the token's age stays")

        let seeded = SharedRefreshDecision.granted(StoredSession(), accessToken: Secret("a"), lifetime: 3600, requestedAt: Self.now,
                                                   usedRefreshToken: Secret("file-refresh"), rotated: nil, now: Self.now)
        #expect(seeded.generation == 1)
        #expect(seeded.refreshToken == Secret("file-refresh"), "the file's seed is now in the store")
    }
}
