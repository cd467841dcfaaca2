import Foundation
import PinproxyTestSupport
import Testing

/// Spotify sessions shared across replicas through PostgreSQL (docs/contract.md §12):
/// three real `pinproxy run` processes, one real PostgreSQL 15 started here,
/// one mock accounts service that rotates the refresh token on every refresh.
@Suite("Session store end to end", .blockingWaits, .serialized, .enabled(if: PostgresServer.unavailableReason == nil))
struct SessionStoreEndToEndTests {
    /// Several expiries, requests round-robin through three replicas started
    /// at once: every request carries a valid token, accounts sees one call per
    /// stored generation and never a superseded refresh token, the table was
    /// created once, and the database holds no token in clear.
    @Test func threeReplicasShareOneTokenCallPerGeneration() async throws {
        let cluster = try await SessionStoreCluster(replicas: 3) {
            $0.update { $0.rotateRefreshTokens = true; $0.expiresIn = 3 }
        }
        // Each replica reaches the store; exactly one created the table.
        for replica in cluster.replicas {
            #expect(await pollUntil(timeout: 30) { replica.log.contains("session store reachable") }, "\(replica.log)")
        }
        let created = cluster.replicas.map { $0.log.components(separatedBy: "created the session store table").count - 1 }
        #expect(created.reduce(0, +) == 1, "table creations per replica: \(created)")

        // Lifetime 3 s, refresh_before 1 s: a new generation every ~2 s. Run ~5 lifetimes.
        let started = Date()
        var requests = 0
        var failures: [String] = []
        while Date().timeIntervalSince(started) < 15 {
            for index in 0..<3 {
                for host in ["api.spotify.test", "apps.spotify.test"] {
                    let result = try cluster.get(index, host: host)
                    requests += 1
                    if result.status != 200 { failures.append("replica \(index) \(host): \(result.status) \(result.body)") }
                }
            }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(failures.isEmpty, "\(failures.count) of \(requests) failed: \(failures.prefix(5))")
        // The Web API only answers 200 to a token accounts issued and that has not expired.
        #expect(cluster.api.seen.allSatisfy { $0.status == 200 })

        let userCalls = cluster.calls("refresh_token")
        let appCalls = cluster.calls("client_credentials")
        #expect(cluster.accounts.counters.supersededRefreshTokens == 0, "a replica refreshed with a superseded refresh token")
        #expect(try cluster.storedGeneration("user") == userCalls, "one refresh_token call per stored generation")
        #expect(try cluster.storedGeneration("app") == appCalls, "one client_credentials call per stored generation")
        // One call per expiry for all three replicas together, not one each:
        // at most one per soft lifetime (2 s) of the run, plus the first.
        let expiries = Int(elapsed / 2) + 2
        #expect(userCalls >= 3 && userCalls <= expiries, "\(userCalls) refresh_token calls in \(elapsed) s")
        #expect(appCalls >= 3 && appCalls <= expiries, "\(appCalls) client_credentials calls in \(elapsed) s")

        // The database never holds a token in clear.
        let dump = try #require(try cluster.postgres?.dump())
        #expect(dump.contains("pinproxy_spotify_sessions"))
        let tokens = cluster.accounts.counters.issuedAccessTokens
            + [cluster.seedRefreshToken, cluster.accounts.counters.lastIssuedRefreshToken].compactMap { $0 }
        #expect(tokens.count > 4)
        for token in tokens {
            #expect(!dump.contains(token), "the dump holds a token in clear")
            #expect(!dump.contains(String(token.suffix(20))), "the dump holds part of a token in clear")
        }
    }

    /// A 401 on one replica invalidates the generation for all: one refresh,
    /// and the other replicas, when the Web API refuses them the same token,
    /// take the new one from the store without calling accounts.
    @Test func a401OnOneReplicaCausesOneRefreshForAll() async throws {
        let cluster = try await SessionStoreCluster(replicas: 3) {
            $0.update { $0.rotateRefreshTokens = true; $0.expiresIn = 3600 }
        }
        for index in 0..<3 { #expect(try cluster.get(index).status == 200) }
        #expect(cluster.calls("refresh_token") == 1, "a replica that finds a valid token in the store makes no call")
        // The user session's token, as the Web API saw it (the app session has one of its own).
        let first = try #require(cluster.api.seen.last?.authorization?.replacingOccurrences(of: "Bearer ", with: ""))
        #expect(Set(cluster.api.seen.map(\.authorization)).count == 1, "all three replicas sent the same token")
        cluster.accounts.revokeAccessToken(first)

        let afterRevoke = try cluster.get(0)
        #expect(afterRevoke.status == 200, "\(afterRevoke.body)")
        #expect(cluster.calls("refresh_token") == 2)
        for index in 1..<3 {
            let result = try cluster.get(index)
            #expect(result.status == 200, "replica \(index): \(result.body)")
        }
        #expect(cluster.calls("refresh_token") == 2, "the other replicas took the new generation from the store")
        #expect(try cluster.storedGeneration("user") == 2)
        #expect(cluster.accounts.counters.supersededRefreshTokens == 0)
        // Each replica sent the revoked token once, got 401, and retried with the new one.
        let unauthorized = cluster.api.seen.filter { $0.status == 401 }
        #expect(unauthorized.count == 3)
        #expect(unauthorized.allSatisfy { $0.authorization == "Bearer \(first)" })
    }

    /// PostgreSQL stopped mid-run: cached tokens serve while valid; the
    /// refresh_token session does not refresh on its own and answers 503
    /// token_unavailable once its token expired; the client_credentials session
    /// fetches its own; `pinproxy_store_up` and /readyz say so. Started again:
    /// both recover without a restart, and no superseded refresh token was sent.
    @Test func storeOutageAndRecovery() async throws {
        let cluster = try await SessionStoreCluster(replicas: 2) {
            $0.update { $0.rotateRefreshTokens = true; $0.expiresIn = 6 }
        }
        let postgres = try #require(cluster.postgres)
        for index in 0..<2 {
            #expect(try cluster.get(index).status == 200)
            #expect(try cluster.get(index, host: "apps.spotify.test").status == 200)
        }
        #expect(try cluster.storeUp(0) == 1)
        let userCallsBefore = cluster.calls("refresh_token")

        postgres.stop()
        // Cached tokens keep serving (the token is at most a few seconds old).
        #expect(try cluster.get(0).status == 200)
        #expect(try cluster.get(1).status == 200)
        #expect(await pollUntil(timeout: 20, every: 0.2) { (try? cluster.storeUp(0)) == 0 }, "pinproxy_store_up drops to 0")
        let readyz = try cluster.admin(0, "/readyz")
        #expect(readyz.body.contains("session store"), "\(readyz.body)")

        // Once the user token expires: 503 token_unavailable, and no refresh_token call.
        let refused = await pollFor(timeout: 30, every: 0.3) { () -> CurlResult? in
            guard let result = try? cluster.get(0), result.status == 503 else { return nil }
            return result
        }
        #expect(refused?.pinproxyError == "token_unavailable", "\(String(describing: refused))")
        #expect(cluster.calls("refresh_token") == userCallsBefore, "a refresh_token session never refreshes without the store")
        // The client_credentials session fetches its own token and keeps serving.
        let appsWhileDown = try cluster.get(1, host: "apps.spotify.test")
        #expect(appsWhileDown.status == 200, "\(appsWhileDown.body)")

        try postgres.start()
        for index in 0..<2 {
            #expect(await pollUntil(timeout: 30, every: 0.3) { (try? cluster.get(index).status) == 200 }, "replica \(index) recovers")
            #expect(await pollUntil(timeout: 20, every: 0.2) { (try? cluster.storeUp(index)) == 1 }, "store_up back to 1")
        }
        #expect(cluster.accounts.counters.supersededRefreshTokens == 0)
        #expect(try cluster.storedGeneration("user") == cluster.calls("refresh_token"))
    }

    /// `pinproxy spotify login` writes the refresh token into the store: a
    /// session with no refresh_token_file, refused (503) by both replicas until
    /// then, serves on both afterwards without a restart.
    @Test func loginWritesIntoTheStoreAndEveryReplicaServesWithIt() async throws {
        let loginPort = try freePort()
        let cluster = try await SessionStoreCluster(replicas: 2, refreshTokenFile: false, loginPort: loginPort) {
            $0.update { $0.rotateRefreshTokens = true }
        }
        let before = try cluster.get(0)
        #expect(before.status == 503 && before.pinproxyError == "token_unavailable", "\(before.status) \(before.body)")

        let login = try ChildProcess(PinproxyBinary.path, ["spotify", "login", "user", "--config", cluster.dir.file("etc/pinproxy.yaml")],
                                     directory: cluster.dir, name: "login", currentDirectory: cluster.dir.path)
        let url = try login.waitForOutput(timeout: 30) { output in
            output.split(separator: "\n").first { $0.hasPrefix("https://accounts.spotify.test/authorize?") }.map(String.init)
        }
        _ = try login.waitForOutput(timeout: 20) { $0.contains("Waiting for the redirect") ? true : nil }
        let page = try Curl.run(url, proxyURL: nil, caFile: cluster.pki.rootCertificate,
                                extra: ["-L", "--connect-to", "accounts.spotify.test:443:127.0.0.1:\(cluster.accounts.port)"],
                                directory: cluster.dir)
        #expect(page.status == 200, "\(page.body)")
        #expect(login.waitForExit(timeout: 30) == 0, "\(login.outputText)")
        #expect(login.outputText.contains("Stored the refresh token of session user in the session store."), "\(login.outputText)")

        for index in 0..<2 {
            #expect(await pollUntil(timeout: 30, every: 0.3) { (try? cluster.get(index).status) == 200 }, "replica \(index) serves after the login")
        }
        #expect(cluster.calls("refresh_token") == 1, "one refresh for both replicas")
        let dump = try #require(try cluster.postgres?.dump())
        let issued = try #require(cluster.accounts.counters.lastIssuedRefreshToken)
        #expect(!dump.contains(issued))
    }
}
