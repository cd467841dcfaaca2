import Foundation
import PinproxyTestSupport
import Testing

/// `credentials:` through the real binary, against Authlib's OAuth2 server
/// (Scripts/authlib_server.py, a provider this project did not write): client
/// credentials with Basic and post client auth, scope and audience, refresh
/// with rotation, 401 replay, single flight; static keys in any header; a
/// credential per client identity. (An upstream's 429 held per credential
/// runs in process, with a clock the test moves: UpstreamThrottleWindowTests.)
@Suite("Credentials for any API end to end", .blockingWaits, .serialized)
struct CredentialsEndToEndTests {
    static let staticKey = "ghp_STATIC_test_value_8f3a91"
    static let billingPassword = "billing-pass-1"
    static let reportsPassword = "reports-pass-2"
    static let hosts = ["idp.authlib.test", "api.authlib.test", "post.authlib.test", "rt.authlib.test", "keys.authlib.test",
                        "token.authlib.test", "both.authlib.test", "strict.authlib.test",
                        "limited.authlib.test", "queued.authlib.test"]

    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let provider: ChildProcess
        let providerPort: Int
        let proxy: ProxyHarness
        let refreshTokenFile: String

        init() throws {
            dir = try TemporaryDirectory("pinproxy-credentials")
            pki = try TestPKI.make(in: dir, names: CredentialsEndToEndTests.hosts)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/authlib_server.py").path
            provider = try ChildProcess("python3", ["-u", script, pki.chainFile, pki.leafKey, "seed-refresh-token-1"],
                                        directory: dir, name: "authlib")
            providerPort = try provider.waitForOutput(timeout: 20) { text in
                text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
            }
            try dir.write("basic.secret", "s3cret-basic\n")
            try dir.write("gh.token", CredentialsEndToEndTests.staticKey + "\n")
            refreshTokenFile = try dir.write("rt.token", "seed-refresh-token-1\n")
            chmod(refreshTokenFile, 0o600)
            let reportsHash = try Self.passwd(CredentialsEndToEndTests.reportsPassword)
            let billingHash = try Self.passwd(CredentialsEndToEndTests.billingPassword)
            let pin = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let (port, root) = (providerPort, pki.rootCertificate)
            func host(_ name: String, _ auth: String?) -> String {
                """
                  - match: \(name)
                    upstream: 127.0.0.1:\(port)
                    tls: { ca_file: \(root) }
                    probe_interval: 0
                    pins: { spki_sha256: [{pin: "\(pin)"}, {pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}] }
                \(auth.map { $0.hasPrefix("rate_limit") ? "    \($0)\n" : "    auth: \($0)\n" } ?? "")
                """
            }
            let policies = "hosts:\n" + [
                host("idp.authlib.test", nil),
                host("api.authlib.test", "{credential: basic}"),
                host("post.authlib.test", "{credential: post}"),
                host("rt.authlib.test", "{credential: user}"),
                host("keys.authlib.test", "{credential: gh, header: X-Api-Key, format: \"{token}\"}"),
                host("token.authlib.test", "{credential: gh, format: \"token {token}\"}"),
                host("both.authlib.test", "{by_client: {billing: basic, reports: post}, default: none}"),
                host("strict.authlib.test", "{by_client: {billing: basic}, require: true}"),
                host("limited.authlib.test", "rate_limit: {requests_per_second: 0.01, burst: 2, per: client}"),
                host("queued.authlib.test", "{credential: gh, throttle_queue: 2}"),
            ].joined()
            proxy = try ProxyHarness(policies: policies, mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                clients:
                  allow: [127.0.0.0/8]
                  identities:
                    billing: {password_hash: "\(billingHash)"}
                    reports: {password_hash: "\(reportsHash)"}
                credentials:
                  gh: {kind: static, value_file: ../gh.token}
                  basic:
                    kind: oauth2
                    token_url: https://idp.authlib.test/oauth/token
                    grant: client_credentials
                    client_id: cc-basic
                    client_secret_file: ../basic.secret
                    scope: "read write"
                    audience: https://api.authlib.test
                  post:
                    kind: oauth2
                    token_url: https://idp.authlib.test/oauth/token
                    grant: client_credentials
                    client_id: cc-post
                    client_secret: ${PINPROXY_TEST_POST_SECRET}
                    client_auth: post
                  user:
                    kind: oauth2
                    token_url: https://idp.authlib.test/oauth/token
                    grant: refresh_token
                    client_id: rt-client
                    client_secret: s3cret-rt
                    client_auth: post
                    refresh_token_file: ../rt.token
                """, directory: dir, environment: ["PINPROXY_TEST_POST_SECRET": "s3cret-post"])
        }

        deinit { provider.stop() }

        static func passwd(_ password: String) throws -> String {
            let (status, stdout, stderr) = try ChildProcess.runSeparately(PinproxyBinary.path, ["passwd", "--iterations", "20000"],
                                                                          input: password + "\n")
            guard status == 0 else { throw TestSupportError("pinproxy passwd: \(stderr)") }
            return stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func get(_ url: String, as identity: (String, String)? = nil) throws -> CurlResult {
            let extra = identity.map { ["--proxy-user", "\($0.0):\($0.1)"] } ?? []
            return try Curl.run(url, proxy: proxy, extra: extra, directory: dir)
        }

        /// Straight to the provider (not through pinproxy): its counters and controls.
        func provider(_ path: String, post: Bool = false) throws -> [String: Any] {
            let result = try Curl.run("https://idp.authlib.test:\(providerPort)\(path)", proxyURL: nil, caFile: pki.rootCertificate,
                                      extra: ["--resolve", "idp.authlib.test:\(providerPort):127.0.0.1"] + (post ? ["-X", "POST"] : []),
                                      directory: dir)
            return try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any], "\(result.body)")
        }

        func tokenCalls(_ client: String) throws -> Int {
            (try provider("/_stats")["token_calls"] as? [String: Int])?[client] ?? 0
        }

        func whoami(_ host: String, as identity: (String, String)? = nil) throws -> String? {
            let result = try get("https://\(host)/api/whoami", as: identity)
            guard result.status == 200 else { return "status \(result.status) \(result.headers["x-pinproxy-error"] ?? "")" }
            return (try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])?["client"] as? String
        }
    }

    @Test func clientCredentialsWithBasicAndPostClientAuthSendScopeAndAudience() throws {
        let stack = try Stack()
        #expect(try stack.whoami("api.authlib.test") == "cc-basic")
        #expect(try stack.whoami("post.authlib.test") == "cc-post")
        let stats = try stack.provider("/_stats")
        let methods = try #require(stats["auth_methods"] as? [[String]])
        #expect(methods.contains(["cc-basic", "client_secret_basic"]))
        #expect(methods.contains(["cc-post", "client_secret_post"]))
        let forms = try #require(stats["forms"] as? [[String: String]])
        #expect(forms.contains { $0["grant_type"] == "client_credentials" && $0["scope"] == "read write" && $0["audience"] == "https://api.authlib.test" })
        // Post client auth names the client in the body; Basic does not.
        #expect(forms.contains { $0["client_id"] == "cc-post" })
        #expect(!forms.contains { $0["client_id"] == "cc-basic" })
    }

    @Test func fiftyConcurrentRequestsMakeOneTokenCall() throws {
        let stack = try Stack()
        let (status, output) = try ConcurrentApps.run(50, host: "api.authlib.test", path: "/api/whoami", proxyPort: stack.proxy.port,
                                                      caFile: stack.proxy.caFile, in: stack.dir)
        #expect(status == 0, "\(output)")
        #expect(output.contains("200s: 50"), "\(output)")
        #expect(try stack.tokenCalls("cc-basic") == 1)
    }

    @Test func aRefusedTokenIsRefreshedAndTheRequestReplayedOnce() throws {
        let stack = try Stack()
        #expect(try stack.whoami("api.authlib.test") == "cc-basic")
        _ = try stack.provider("/_control/revoke?client=cc-basic", post: true)
        // The provider now answers 401 to the cached token: the app still sees 200.
        #expect(try stack.whoami("api.authlib.test") == "cc-basic")
        #expect(try stack.tokenCalls("cc-basic") == 2)
    }

    @Test func aRotatedRefreshTokenIsPersisted() throws {
        let stack = try Stack()
        #expect(try stack.whoami("rt.authlib.test") == "rt-client")
        let issued = try #require(try stack.provider("/_stats")["refresh_tokens_issued"] as? [String])
        let rotated = try #require(issued.last)
        #expect(rotated != "seed-refresh-token-1")
        #expect(TextFile.read(stack.refreshTokenFile).trimmingCharacters(in: .whitespacesAndNewlines) == rotated)
    }

    @Test func aStaticKeyGoesIntoAnyHeaderAndNowhereElse() throws {
        let stack = try Stack()
        let key = CredentialsEndToEndTests.staticKey
        let intoKey = try stack.get("https://keys.authlib.test/api/echo", as: nil)
        #expect(intoKey.status == 200)
        #expect(intoKey.body.contains("\"x_api_key\":\"\(key)\""), "\(intoKey.body)")
        let intoAuthorization = try stack.get("https://token.authlib.test/api/echo")
        #expect(intoAuthorization.body.contains("\"authorization\":\"token \(key)\""), "\(intoAuthorization.body)")
        // A refusal on a credentialled host (TRACE withholds the key) and the operator's views.
        _ = try Curl.run("https://keys.authlib.test/api/echo", proxy: stack.proxy, extra: ["-X", "TRACE"], directory: stack.dir)
        let admin = "http://127.0.0.1:\(try stack.proxy.adminPort)"
        var outputs = [stack.proxy.log]
        for path in ["/metrics", "/", "/policies", "/readyz"] {
            outputs.append(try Curl.run(admin + path, proxyURL: nil, caFile: nil, directory: stack.dir).body)
        }
        // The views name the credential, never its value.
        #expect(outputs[3].contains("\"credential\"") && outputs[3].contains("X-Api-Key"), "\(outputs[3])")
        _ = try stack.whoami("api.authlib.test")
        let metrics = try Curl.run(admin + "/metrics", proxyURL: nil, caFile: nil, directory: stack.dir).body
        #expect(metrics.contains("pinproxy_token_refreshes_total{session=\"basic\",credential=\"basic\",result=\"success\"} 1"), "\(metrics)")
        outputs.append(metrics)
        let (_, explain) = try ChildProcess.run(PinproxyBinary.path, ["explain", "keys.authlib.test", "--config", stack.dir.file("etc/pinproxy.yaml")],
                                                environment: ProcessInfo.processInfo.environment.merging(["PINPROXY_TEST_POST_SECRET": "s3cret-post"]) { $1 })
        #expect(explain.contains("credential gh"), "\(explain)")
        outputs.append(explain)
        for secret in [key, "s3cret-basic", "s3cret-post", "s3cret-rt"] {
            #expect(!outputs.contains { $0.contains(secret) }, "\(secret) leaked")
        }
    }

    @Test func aStaticValueFileIsReadAgainOnReload() throws {
        let stack = try Stack()
        #expect(try stack.get("https://keys.authlib.test/api/echo").body.contains(CredentialsEndToEndTests.staticKey))
        try stack.dir.write("gh.token", "ghp_ROTATED_value\n")
        let admin = "http://127.0.0.1:\(try stack.proxy.adminPort)"
        #expect(try Curl.run(admin + "/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: stack.dir).status == 200)
        #expect(try stack.get("https://keys.authlib.test/api/echo").body.contains("\"x_api_key\":\"ghp_ROTATED_value\""))
    }

    @Test func twoIdentitiesCarryTwoCredentialsNeverCrossed() throws {
        let stack = try Stack()
        let billing = ("billing", CredentialsEndToEndTests.billingPassword)
        let reports = ("reports", CredentialsEndToEndTests.reportsPassword)
        for _ in 0..<3 {
            #expect(try stack.whoami("both.authlib.test", as: billing) == "cc-basic")
            #expect(try stack.whoami("both.authlib.test", as: reports) == "cc-post")
        }
        // `default: none`: an anonymous client's request goes without a credential.
        #expect(try stack.whoami("both.authlib.test") == "status 401 ")
        // `require: true`: a client with no credential mapped is refused here.
        #expect(try stack.whoami("strict.authlib.test", as: billing) == "cc-basic")
        #expect(try stack.whoami("strict.authlib.test", as: reports) == "status 403 client_denied")
    }

    @Test func aPolicysRateLimitAnswers429LocallyPerClient() throws {
        let stack = try Stack()
        let billing = ("billing", CredentialsEndToEndTests.billingPassword)
        let reports = ("reports", CredentialsEndToEndTests.reportsPassword)
        let before = try #require(try stack.provider("/_stats")["echo"] as? [Any]).count
        #expect(try stack.get("https://limited.authlib.test/api/echo", as: billing).status == 200)
        #expect(try stack.get("https://limited.authlib.test/api/echo", as: billing).status == 200)
        let third = try stack.get("https://limited.authlib.test/api/echo", as: billing)
        #expect(third.status == 429)
        #expect(third.headers["x-pinproxy-error"] == "rate_limited")
        #expect(Int(third.headers["retry-after"] ?? "") ?? 0 >= 1)
        #expect(try #require(try stack.provider("/_stats")["echo"] as? [Any]).count == before + 2, "the refused request never went up")
        // `per: client`: another identity has its own burst.
        #expect(try stack.get("https://limited.authlib.test/api/echo", as: reports).status == 200)
    }
}
