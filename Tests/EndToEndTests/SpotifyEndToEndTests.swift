import Foundation
import PinproxyTestSupport
import Testing

/// Spotify sessions through the real binary: the legacy app (curl) holds no
/// secret; pinproxy fetches, caches, refreshes and attaches tokens, and its own
/// token request obeys the accounts host's pinned policy.
@Suite("Spotify tokens end to end", .blockingWaits, .serialized)
struct SpotifyEndToEndTests {
    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let api: MockWebAPI
        let proxy: ProxyHarness
        let refreshTokenFile: String

        init(flow: String = "client_credentials", accountsPinned correctly: Bool = true,
             configureAccounts: (MockAccounts) -> Void = { _ in }) async throws {
            dir = try TemporaryDirectory("pinproxy-spotify")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.spotify.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            configureAccounts(accounts)
            api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            refreshTokenFile = dir.file("user.token")
            try dir.write("user.token", accounts.issueRefreshToken() + "\n")
            chmod(refreshTokenFile, 0o600)
            let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let accountsPins = correctly ? Scenario.pins(intermediate, Scenario.backupPin)
                : Scenario.pins(Scenario.backupPin, "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=")
            let policies = Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), accountsPins),
                .intercept("api.spotify.test", upstream: .port(api.port), Scenario.pins(intermediate, Scenario.backupPin), "auth: { spotify: app }"),
            ], caFile: pki.rootCertificate)
            let session = flow == "client_credentials"
                ? "      flow: client_credentials\n      client_id: \(accounts.clientID)\n      client_secret_file: ../secret.txt\n"
                : "      flow: refresh_token\n      client_id: \(accounts.clientID)\n      client_secret_file: ../secret.txt\n      refresh_token_file: ../user.token\n"
            proxy = try ProxyHarness(policies: policies, mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                spotify:
                  accounts: https://accounts.spotify.test
                  token_timeout: 3s
                  sessions:
                    app:
                \(session)      refresh_before: 1s
                """, directory: dir)
        }

        func get(_ path: String = "/v1/me", _ extra: [String] = []) throws -> CurlResult {
            try Curl.run("https://api.spotify.test\(path)", proxy: proxy, extra: extra, directory: dir)
        }

    }

    @Test func fiftyConcurrentRequestsShareOneTokenRequest() async throws {
        let stack = try await Stack()
        let (status, output) = try ConcurrentApps.run(50, host: "api.spotify.test", path: "/v1/me", proxyPort: stack.proxy.port,
                                                      caFile: stack.proxy.caFile, in: stack.dir)
        #expect(status == 0, "\(output)")
        #expect(output.contains("200s: 50"), "\(output)")
        #expect(stack.accounts.counters.tokenRequests == 1)
        let bearer = "Bearer \(stack.accounts.counters.lastIssuedAccessToken ?? "?")"
        #expect(stack.api.authorizationHeaders.count == 50)
        #expect(stack.api.authorizationHeaders.allSatisfy { $0 == bearer })
    }

    /// A pooled upstream connection is ready at once while the token is still
    /// being fetched: the body must still wait for its head (it once went
    /// first, and the upstream read `{"uris"…}POST …` as a request line).
    @Test func aBodyNeverReachesThePooledUpstreamBeforeItsHead() async throws {
        let stack = try await Stack()
        // Head and body in one write, after a warm-up that leaves the upstream
        // connection pooled: the body is read while the token is being fetched.
        let script = try stack.dir.write("body_first.py", #"""
            import socket, ssl, sys
            port, ca = int(sys.argv[1]), sys.argv[2]
            sock = socket.create_connection(("127.0.0.1", port), timeout=20)
            sock.sendall(b"CONNECT api.spotify.test:443 HTTP/1.1\r\nHost: api.spotify.test:443\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            tls = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="api.spotify.test")
            def exchange(request):
                tls.sendall(request)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += tls.recv(65536)
                head, body = data.split(b"\r\n\r\n", 1)
                length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
                while len(body) < length:
                    body += tls.recv(65536)
                return head.split(b" ")[1].decode(), body.decode()
            print(exchange(b"GET /v1/me HTTP/1.1\r\nHost: api.spotify.test\r\n\r\n")[0])
            body = b'{"uris": ["spotify:track:x"]}'
            status, answer = exchange(b"POST /v1/me/player/queue HTTP/1.1\r\nHost: api.spotify.test\r\nContent-Type: application/json\r\n"
                                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            print(status, answer)
            """#)
        let (status, output) = try ChildProcess.run("python3", [script, String(stack.proxy.port), stack.proxy.caFile])
        #expect(status == 0, "\(output)")
        #expect(output.contains("200\n200 "), "\(output)")
        let last = stack.api.seen.last
        #expect(last?.method == "POST")
        #expect(last?.bodyBytes == 29)
    }

    /// TRACE echoes the request to the app: no bearer token goes with it.
    @Test func traceNeverCarriesTheInjectedToken() async throws {
        let stack = try await Stack()
        #expect(try stack.get().status == 200)
        _ = try stack.get("/v1/me", ["-X", "TRACE"])
        let trace = stack.api.seen.last { $0.method == "TRACE" }
        #expect(trace != nil, "the TRACE reached the upstream")
        #expect(trace?.authorization == nil, "no token on a TRACE: \(trace?.authorization ?? "")")
    }

    @Test func anExpiringTokenIsReplacedAheadOfExpiry() async throws {
        let stack = try await Stack { $0.update { $0.expiresIn = 3 } }
        #expect(try stack.get().status == 200)
        let first = stack.api.authorizationHeaders.last!
        // The token lives 3 s in the real binary: requests until one carries a new one.
        let replaced = try await pollUntil(timeout: 30, every: 0.5) {
            try stack.get().status == 200 && stack.api.authorizationHeaders.last! != first
        }
        #expect(replaced, "a request carries a new token once the first expires")
        #expect(stack.api.seen.allSatisfy { $0.status == 200 }, "no request was sent with an expired token")
    }

    @Test func a401OnceIsRepairedWithOneRefreshAndA403IsPassedOn() async throws {
        let stack = try await Stack()
        #expect(try stack.get().status == 200)
        let before = stack.accounts.counters.tokenRequests
        stack.api.update { $0.unauthorizedNext = 1 }
        let repaired = try stack.get("/v1/me/player")
        #expect(repaired.status == 200, "\(repaired.body)")
        #expect(stack.accounts.counters.tokenRequests == before + 1)
        #expect(stack.api.seen.suffix(2).map(\.status) == [401, 200])

        stack.api.update { $0.forbidden = true }
        let forbidden = try stack.get()
        #expect(forbidden.status == 403)
        #expect(stack.accounts.counters.tokenRequests == before + 1, "a 403 never refreshes")
    }

    @Test func aCachedTokenServesWhileAccountsIsDown() async throws {
        let stack = try await Stack()
        #expect(try stack.get().status == 200)
        stack.accounts.update { $0.down = true }
        #expect(try stack.get().status == 200)
    }

    @Test func withAccountsDownAndNoTokenTheAnswerIs503() async throws {
        let stack = try await Stack { $0.update { $0.down = true } }
        let result = try stack.get()
        #expect(result.status == 503)
        #expect(result.pinproxyError == "token_unavailable")
        #expect(stack.api.seen.isEmpty, "nothing reached the API without a token")
    }

    @Test func a429WithRetryAfterIsHonoured() async throws {
        let stack = try await Stack { $0.update { $0.rateLimitNext = 1; $0.retryAfter = 2 } }
        // The first token request (at start) is answered 429 Retry-After: 2; the session
        // waits that long, within the 3 s a request may wait, and the second one succeeds.
        let result = try stack.get()
        #expect(result.status == 200, "\(result.body)")
        #expect(stack.accounts.counters.tokenRequests == 2, "one 429, one success: no hammering")
    }

    @Test func aRotatedRefreshTokenIsStoredAndAnOmittedOneLeavesTheFile() async throws {
        let rotating = try await Stack(flow: "refresh_token") { $0.update { $0.rotateRefreshTokens = true } }
        #expect(try rotating.get().status == 200)
        let issued = try #require(rotating.accounts.counters.lastIssuedRefreshToken)
        #expect(await pollUntil { TextFile.read(rotating.refreshTokenFile) == issued + "\n" })
        #expect(TextFile.permissions(rotating.refreshTokenFile) == 0o600)

        let steady = try await Stack(flow: "refresh_token")
        let before = try Data(contentsOf: URL(fileURLWithPath: steady.refreshTokenFile))
        #expect(try steady.get().status == 200)
        #expect(try Data(contentsOf: URL(fileURLWithPath: steady.refreshTokenFile)) == before)
    }

    @Test func aClientsOwnAuthorizationNeverReachesTheAPI() async throws {
        let stack = try await Stack()
        #expect(try stack.get("/v1/me", ["-H", "Authorization: Bearer evil"]).status == 200)
        #expect(!stack.api.authorizationHeaders.contains { $0?.contains("evil") == true })
    }

    @Test func withTheAccountsPinWrongNoTokenIsFetchedAndTheErrorSaysWhy() async throws {
        let stack = try await Stack(accountsPinned: false)
        let result = try stack.get()
        #expect(result.status == 503)
        #expect(result.pinproxyError == "token_unavailable")
        #expect(stack.accounts.counters.tokenRequests == 0, "the secret never left pinproxy")
        #expect(stack.proxy.log.contains("upstream pin check failed"))
        #expect(stack.proxy.log.contains("accounts.spotify.test"))
    }

    @Test func theTokenAndTheSecretsAppearNowhereInPinproxysOutput() async throws {
        let stack = try await Stack(flow: "refresh_token") { $0.update { $0.rotateRefreshTokens = true } }
        #expect(try stack.get().status == 200)
        stack.api.update { $0.unauthorizedNext = 1 }
        #expect(try stack.get().status == 200)
        let log = stack.proxy.log
        #expect(!log.isEmpty)
        for secret in [stack.accounts.clientSecret, stack.accounts.counters.lastIssuedAccessToken, stack.accounts.counters.lastIssuedRefreshToken] {
            let value = try #require(secret)
            #expect(!log.contains(value), "a secret reached pinproxy's output")
        }
        let admin = "http://127.0.0.1:\(try stack.proxy.adminPort)"
        for path in ["/metrics", "/policies", "/readyz"] {
            let body = try Curl.run("\(admin)\(path)", proxyURL: nil, caFile: nil, directory: stack.dir).body
            #expect(!body.contains(stack.accounts.clientSecret))
            #expect(!body.contains(stack.accounts.counters.lastIssuedAccessToken ?? "?"))
        }
    }
}

extension SpotifyEndToEndTests {
    @Test func aSessionAddedByAReloadServesTokens() async throws {
        let stack = try await Stack()
        #expect(try stack.get().status == 200)
        let before = stack.accounts.counters.tokenRequests
        // The session is renamed in the main file and in the policy that names it.
        let main = try String(contentsOfFile: stack.dir.file("etc/pinproxy.yaml"), encoding: .utf8)
        try stack.dir.write("etc/pinproxy.yaml", main.replacingOccurrences(of: "    app:\n", with: "    renamed:\n"))
        let policy = try String(contentsOfFile: stack.dir.file("etc/policies/test.yaml"), encoding: .utf8)
        try stack.dir.write("etc/policies/test.yaml", policy.replacingOccurrences(of: "auth: { spotify: app }", with: "auth: { spotify: renamed }"))
        let admin = "http://127.0.0.1:\(try stack.proxy.adminPort)"
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: stack.dir)
        #expect(reload.status == 200, "\(reload.body)")
        let after = try stack.get()
        #expect(after.status == 200, "\(after.body)")
        #expect(stack.accounts.counters.tokenRequests > before, "the new session fetched its own token")
        #expect(stack.api.authorizationHeaders.last == "Bearer \(stack.accounts.counters.lastIssuedAccessToken ?? "?")")
    }
}
