import Foundation
import PinproxyTestSupport
import Testing

/// The accounts service and the refresh-token file misbehaving under a
/// Spotify session (docs/contract.md §14): each answered as §4 says (503
/// `token_unavailable` when no token can be had), each failed attempt logged
/// once and counted, and the next request served once the fault is gone.
@Suite("Accounts and token-file faults end to end", .blockingWaits, .serialized)
struct AccountsFaultTests {
    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let api: MockWebAPI
        let proxy: ProxyHarness
        let tokenFile: String
        let mount: SmallTmpfs?

        /// `tokenDisk`: the refresh-token file lives on a small tmpfs of its own.
        init(flow: String = "client_credentials", tokenDisk: Bool = false,
             configureAccounts: (MockAccounts) -> Void = { _ in }) async throws {
            dir = try TemporaryDirectory("pinproxy-accounts-faults")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.spotify.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            configureAccounts(accounts)
            api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            mount = tokenDisk ? try SmallTmpfs(at: dir.file("tokens"), kilobytes: 64) : nil
            try FileManager.default.createDirectory(atPath: dir.file("tokens"), withIntermediateDirectories: true)
            tokenFile = dir.file("tokens/user.token")
            try (accounts.issueRefreshToken() + "\n").write(toFile: tokenFile, atomically: false, encoding: .utf8)
            chmod(tokenFile, 0o600)
            let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let pins = Scenario.pins(intermediate, Scenario.backupPin)
            let session = flow == "client_credentials"
                ? "      flow: client_credentials\n"
                : "      flow: refresh_token\n      refresh_token_file: \(tokenFile)\n"
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), pins),
                .intercept("api.spotify.test", upstream: .port(api.port), pins, "auth: { spotify: app }"),
            ], caFile: pki.rootCertificate), mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                spotify:
                  accounts: https://accounts.spotify.test
                  token_timeout: 2s
                  sessions:
                    app:
                      client_id: \(accounts.clientID)
                      client_secret_file: ../secret.txt
                \(session)      refresh_before: 1s
                """, directory: dir)
        }

        deinit {
            proxy.process.stop()
            mount?.unmount()
        }

        func get(_ path: String = "/v1/me") throws -> CurlResult {
            try Curl.run("https://api.spotify.test\(path)", proxy: proxy, directory: dir)
        }

        func metrics() throws -> PrometheusText {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body)
        }

        func logLines(containing text: String) -> [Substring] {
            proxy.log.split(separator: "\n").filter { $0.contains(text) && !$0.contains("\"pinproxy.access\"") }
        }

        func accessLines(status: Int) -> [[String: Any]] {
            proxy.accessLog.filter { ($0["host"] as? String) == "api.spotify.test" && $0["status"] as? Int == status }
        }

        /// Each failed token request: one warning line and one count.
        func expectFailuresLoggedOnceAndCounted() throws {
            let failures = try metrics().value("pinproxy_token_refreshes_total", ["session": "app", "result": "failure"]) ?? 0
            #expect(failures >= 1)
            #expect(Double(logLines(containing: "Spotify token refresh failed").count) == failures,
                    "one warning per failed attempt: \(logLines(containing: "Spotify token refresh failed"))")
        }
    }

    @Test func accountsThatFlapGive503WhileNoTokenCanBeHadAndServeAgainWhenBack() async throws {
        let stack = try await Stack { $0.update { $0.down = true } }
        let refused = try stack.get()
        #expect(refused.status == 503)
        #expect(refused.pinproxyError == "token_unavailable")
        #expect(stack.api.seen.isEmpty, "nothing reached the API without a token")
        #expect(await pollUntil { stack.accessLines(status: 503).count == 1 }, "one access line for the one refusal")
        #expect(try stack.metrics().value("pinproxy_denied_total", ["reason": "token_unavailable"]) == 1)
        try stack.expectFailuresLoggedOnceAndCounted()

        stack.accounts.update { $0.down = false }
        // The session retries on its backoff; within a bounded wait a request is served.
        #expect(await pollUntil(timeout: 30, every: 0.5) { (try? stack.get().status) == 200 })
        // Down again: the cached token keeps serving.
        stack.accounts.update { $0.down = true }
        #expect(try stack.get().status == 200)
        stack.accounts.update { $0.down = false }
        #expect(try stack.get().status == 200)
    }

    @Test func accountsSlowerThanTokenTimeoutGive503InsteadOfAHang() async throws {
        let stack = try await Stack { $0.update { $0.answerDelay = 6 } }
        let refused = try stack.get()
        #expect(refused.status == 503, "token_timeout is 2 s; the answer would take 6")
        #expect(refused.pinproxyError == "token_unavailable")
        #expect(stack.api.seen.isEmpty)
        #expect(await pollUntil { stack.accessLines(status: 503).count == 1 })
        #expect(try stack.metrics().value("pinproxy_denied_total", ["reason": "token_unavailable"]) == 1)

        stack.accounts.update { $0.answerDelay = 0 }
        #expect(await pollUntil(timeout: 30, every: 0.5) { (try? stack.get().status) == 200 })
    }

    @Test(.enabled(if: SmallTmpfs.available, "needs mount(8) and the right to mount a tmpfs"),
          arguments: ["full", "read-only"])
    func aRotatedRefreshTokenTheDiskWillNotTakeIsKeptInMemoryLoggedAndCounted(disk: String) async throws {
        let stack = try await Stack(flow: "refresh_token", tokenDisk: true) { $0.update { $0.rotateRefreshTokens = true } }
        // The first token, and its rotated refresh token, land while the disk
        // still works (whether the session fetched it at start or for this request).
        #expect(try stack.get().status == 200)
        #expect(await pollUntil(timeout: 15) {
            guard let issued = stack.accounts.counters.lastIssuedRefreshToken else { return false }
            return TextFile.read(stack.tokenFile).contains(issued)
        })
        let before = try String(contentsOfFile: stack.tokenFile, encoding: .utf8)
        if disk == "full" { try #require(stack.mount).fill() } else { try #require(stack.mount).makeReadOnly() }

        // The access token stops working: the 401 makes the session refresh,
        // and that refresh's rotated token is what the disk refuses.
        stack.accounts.expireAccessTokens()
        _ = try stack.get()
        #expect(await pollUntil(timeout: 15) { !stack.logLines(containing: "could not store the rotated Spotify refresh token").isEmpty })
        let failures = stack.logLines(containing: "could not store the rotated Spotify refresh token")
        #expect(failures.count == 1, "logged once: \(failures)")
        #expect(failures.first?.contains(disk == "full" ? "No space left" : "Read-only") == true, "\(failures)")
        #expect(try stack.metrics().value("pinproxy_refresh_token_store_failures_total", ["session": "app"]) == 1)
        #expect(try String(contentsOfFile: stack.tokenFile, encoding: .utf8) == before, "the file is untouched")
        // No token, secret or refresh token in what pinproxy printed.
        let issued = try #require(stack.accounts.counters.lastIssuedRefreshToken)
        #expect(!stack.proxy.log.contains(issued))

        // The next request is served; and when the access token is gone, the
        // refresh uses the rotated token held in memory (the file's is revoked).
        #expect(try stack.get().status == 200)
        stack.accounts.expireAccessTokens()
        #expect(await pollUntil(timeout: 15, every: 0.5) { (try? stack.get().status) == 200 })
        #expect(stack.accounts.counters.byGrantType["refresh_token", default: 0] >= 3)
    }
}
