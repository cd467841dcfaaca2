import Foundation
import PinproxyTestSupport
import Testing

/// The token swap backend through the real binary: an app (curl) swaps a code
/// and refreshes with the encrypted refresh token; accounts is reached through
/// the accounts host's pinned policy.
@Suite("Token swap end to end", .blockingWaits, .serialized)
struct SwapEndToEndTests {
    static let redirectURI = "my-app://spotify-login-callback"

    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let proxy: ProxyHarness
        let swapPort: Int

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-swap")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            try dir.write("swap.key", Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() + "\n")
            try dir.write("legacy.secret", "secret\n")
            let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), Scenario.pins(intermediate, Scenario.backupPin)),
            ], caFile: pki.rootCertificate), mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                spotify:
                  accounts: https://accounts.spotify.test
                  token_timeout: 3s
                  sessions:
                    app:
                      flow: client_credentials
                      client_id: \(accounts.clientID)
                      client_secret_file: ../secret.txt
                  swap:
                    listen: 127.0.0.1:0
                    session: app
                    redirect_uri: \(SwapEndToEndTests.redirectURI)
                    key_file: ../swap.key
                    legacy_secret_file: ../legacy.secret
                """, directory: dir)
            swapPort = try proxy.listeningPort("token swap listening")
        }

        func post(_ path: String, _ field: String, _ value: String) throws -> (status: Int, json: [String: Any], headers: [String: String]) {
            let result = try Curl.run("http://127.0.0.1:\(swapPort)\(path)", proxyURL: nil, caFile: nil,
                                      extra: ["--data-urlencode", "\(field)=\(value)"], directory: dir)
            let json = (try? JSONSerialization.jsonObject(with: Data(result.body.utf8))) as? [String: Any] ?? [:]
            return (result.status, json, result.headers)
        }

        func metrics() throws -> String {
            try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir).body
        }
    }

    @Test func aCodeIsSwappedAndTheEncryptedRefreshTokenRefreshes() async throws {
        let stack = try await Stack()
        stack.accounts.addAuthorizationCode("code-1", redirectURI: Self.redirectURI)
        let swapped = try stack.post("/swap", "code", "code-1")
        #expect(swapped.status == 200, "\(swapped.json)")
        #expect(swapped.json["access_token"] as? String == stack.accounts.counters.lastIssuedAccessToken)
        #expect(swapped.json["expires_in"] as? Int == 3600)
        let raw = try #require(stack.accounts.counters.lastIssuedRefreshToken)
        let sealed = try #require(swapped.json["refresh_token"] as? String)
        #expect(sealed != raw && !sealed.contains(raw), "the app never sees the raw refresh token")
        #expect(swapped.headers["cache-control"] == "no-store")

        let refreshed = try stack.post("/refresh", "refresh_token", sealed)
        #expect(refreshed.status == 200, "\(refreshed.json)")
        #expect(refreshed.json["access_token"] as? String == stack.accounts.counters.lastIssuedAccessToken)
        #expect(refreshed.json["refresh_token"] == nil, "no rotation, nothing to seal")
        #expect(stack.accounts.counters.byGrantType["refresh_token"] == 1)

        // One character changed: 400 and accounts never hears of it.
        let before = stack.accounts.counters.tokenRequests
        var tampered = Array(sealed)
        tampered[tampered.count / 2] = tampered[tampered.count / 2] == "A" ? "B" : "A"
        let refused = try stack.post("/refresh", "refresh_token", String(tampered))
        #expect(refused.status == 400)
        #expect(refused.json["error"] as? String == "invalid_refresh_token")
        #expect(stack.accounts.counters.tokenRequests == before)

        // A rotated refresh token comes back sealed too, and works.
        stack.accounts.update { $0.rotateRefreshTokens = true }
        let rotated = try stack.post("/refresh", "refresh_token", sealed)
        #expect(rotated.status == 200)
        let newRaw = try #require(stack.accounts.counters.lastIssuedRefreshToken)
        #expect(newRaw != raw)
        let newSealed = try #require(rotated.json["refresh_token"] as? String)
        #expect(newSealed != newRaw && !newSealed.contains(newRaw))
        #expect(try stack.post("/refresh", "refresh_token", newSealed).status == 200)
        #expect(try stack.post("/refresh", "refresh_token", sealed).status == 400, "the old one was revoked by accounts")

        let metrics = try stack.metrics()
        #expect(metrics.contains(#"swap_requests_total{endpoint="swap",result="success"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"swap_requests_total{endpoint="refresh",result="invalid_refresh_token"} 1"#))
        #expect(metrics.contains(#"swap_requests_total{endpoint="refresh",result="spotify_error"} 1"#))
        for secret in [raw, newRaw, sealed, "code-1", stack.accounts.clientSecret] {
            #expect(!stack.proxy.log.contains(secret), "a token or secret reached pinproxy's output")
        }
    }

    @Test func spotifysErrorsArePassedOnAndAMissingFieldIsABadRequest() async throws {
        let stack = try await Stack()
        let bad = try stack.post("/swap", "code", "never-issued")
        #expect(bad.status == 400)
        #expect(bad.json["error"] as? String == "invalid_grant")
        let missing = try stack.post("/swap", "nothing", "x")
        #expect(missing.status == 400)
        #expect(missing.json["error"] as? String == "invalid_request")

    }

    @Test func aClientOverItsRateLimitGets429WithRetryAfter() async throws {
        let stack = try await Stack()
        var statuses: [Int] = []
        var retryAfter: String?
        for _ in 0..<14 {
            let result = try stack.post("/refresh", "refresh_token", "garbage")
            statuses.append(result.status)
            if result.status == 429 { retryAfter = result.headers["retry-after"] }
        }
        #expect(statuses.prefix(10).allSatisfy { $0 == 400 }, "\(statuses)")
        #expect(statuses.contains(429), "\(statuses)")
        #expect(Int(retryAfter ?? "") ?? 0 >= 1)
        #expect(try stack.metrics().contains(#"swap_requests_total{endpoint="refresh",result="rate_limited"}"#))
    }

    @Test func aKeyThatIsNot32BytesStopsRunAtStart() throws {
        let dir = try TemporaryDirectory("pinproxy-swap-key")
        try dir.write("secret.txt", "s\n")
        try dir.write("swap.key", Data(repeating: 1, count: 16).base64EncodedString() + "\n")
        try dir.write("etc/policies/test.yaml", "hosts: []\n")
        try dir.write("etc/pinproxy.yaml", """
            listen: 127.0.0.1:0
            admin: { listen: 127.0.0.1:0 }
            ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
            policies: policies
            spotify:
              sessions:
                app: { flow: client_credentials, client_id: id, client_secret_file: ../secret.txt }
              swap: { listen: 127.0.0.1:0, session: app, redirect_uri: "my-app://cb", key_file: ../swap.key }
            """)
        let (status, output) = try ChildProcess.run(PinproxyBinary.path, ["run", "--config", dir.file("etc/pinproxy.yaml")],
                                                    currentDirectory: dir.path)
        #expect(status == 1, "\(output)")
        #expect(output.contains("cannot start the token swap backend"))
        #expect(output.contains("AES-256 needs 32"))
    }
}
