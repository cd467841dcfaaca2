import Foundation
import PinproxyTestSupport
import Testing

/// `pinproxy credentials login NAME` against Authlib's authorization endpoint
/// (Scripts/authlib_server.py: authorization code with PKCE S256 required,
/// approved at once), the browser played by curl following the redirect to
/// the login's loopback listener; then a `run` with the same config serves
/// tokens refreshed from the stored refresh token.
@Suite("credentials login end to end", .blockingWaits, .serialized)
struct CredentialsLoginTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let provider: ChildProcess
        let providerPort: Int
        let loginPort: Int
        let tokenFile: String
        let policies: String
        let mainConfig: String

        /// `client`: `ac-public` (PKCE alone) or `ac-post` (`client_auth: post` with a secret).
        init(client: String) throws {
            dir = try TemporaryDirectory("pinproxy-credentials-login")
            pki = try TestPKI.make(in: dir, names: ["idp.authlib.test", "api.authlib.test"])
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/authlib_server.py").path
            provider = try ChildProcess("python3", ["-u", script, pki.chainFile, pki.leafKey, "unused-seed"], directory: dir, name: "authlib")
            providerPort = try provider.waitForOutput(timeout: 30) { text in
                text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
            }
            tokenFile = dir.file("user.token")
            loginPort = try freePort()
            let pins = Scenario.pins(try TestPKI.opensslSPKIPin(pki.intermediateCertificate), Scenario.backupPin)
            policies = Scenario.policies([
                .intercept("idp.authlib.test", upstream: .port(providerPort), pins),
                .intercept("api.authlib.test", upstream: .port(providerPort), pins, "auth: {credential: user}"),
            ], caFile: pki.rootCertificate)
            let secret = client == "ac-post" ? "    client_secret: s3cret-ac\n    client_auth: post" : ""
            mainConfig = """
                \(ProxyHarness.baseMainConfig)
                network:
                  allow: [127.0.0.0/8]
                credentials:
                  user:
                    kind: oauth2
                    grant: refresh_token
                    token_url: https://idp.authlib.test/oauth/token
                    authorize_url: https://idp.authlib.test/oauth/authorize
                    redirect_uri: http://127.0.0.1:\(loginPort)/callback
                    client_id: \(client)
                    scope: read
                    refresh_token_file: ../user.token
                \(secret)
                """
            try dir.write("etc/pinproxy.yaml", mainConfig)
            try dir.write("etc/policies/test.yaml", policies)
        }

        deinit { provider.stop() }

        /// Starts `credentials login user`; returns it and the authorize URL it printed.
        func startLogin() throws -> (ChildProcess, String) {
            try LoginDriver.start(["credentials", "login", "user"], config: dir.file("etc/pinproxy.yaml"), in: dir,
                                  authorizePrefix: "https://idp.authlib.test/oauth/authorize?")
        }

        /// The browser: open the URL, follow the redirect to the callback.
        func browse(_ url: String) throws -> CurlResult {
            try LoginDriver.browse(url, host: "idp.authlib.test", port: providerPort, caFile: pki.rootCertificate, in: dir)
        }

        /// Straight to the provider: its counters.
        func stats() throws -> [String: Any] {
            let result = try Curl.run("https://idp.authlib.test:\(providerPort)/_stats", proxyURL: nil, caFile: pki.rootCertificate,
                                      extra: ["--resolve", "idp.authlib.test:\(providerPort):127.0.0.1"], directory: dir)
            return try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any], "\(result.body)")
        }

        func lastIssuedRefreshToken() throws -> String? {
            (try stats()["refresh_tokens_issued"] as? [String])?.last
        }
    }

    @Test func aPublicClientLogsInWithPKCEAndRunRefreshesWithTheStoredToken() throws {
        let setup = try Setup(client: "ac-public")
        let (login, url) = try setup.startLogin()
        #expect(url.contains("response_type=code") && url.contains("client_id=ac-public"))
        #expect(url.contains("code_challenge_method=S256") && url.contains("scope=read"))
        #expect(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A\(setup.loginPort)%2Fcallback"))
        let page = try setup.browse(url)
        #expect(page.status == 200, "\(page.body)")
        #expect(page.body.contains("authorised"))
        #expect(login.waitForExit(timeout: 20) == 0, "\(login.outputText)")

        // Authlib required the verifier of the challenge it saw (PKCE S256) and took no secret.
        let stats = try setup.stats()
        let methods = try #require(stats["auth_methods"] as? [[String]])
        #expect(methods.contains(["ac-public", "none"]))
        let issued = try #require(try setup.lastIssuedRefreshToken())
        #expect(TextFile.read(setup.tokenFile) == issued + "\n")
        #expect(TextFile.permissions(setup.tokenFile) == 0o600)
        #expect(!login.outputText.contains(issued), "the refresh token is not printed")

        // `run` refreshes with the stored token (rotated) and the request carries the result.
        let proxy = try ProxyHarness(policies: setup.policies, mainConfig: setup.mainConfig, directory: setup.dir)
        let whoami = try Curl.run("https://api.authlib.test/api/whoami", proxy: proxy, directory: setup.dir)
        #expect(whoami.status == 200, "\(whoami.body) \(proxy.log)")
        #expect(whoami.body.contains("\"client\":\"ac-public\""), "\(whoami.body)")
        let forms = try #require(try setup.stats()["forms"] as? [[String: String]])
        #expect(forms.map { $0["grant_type"] ?? "?" } == ["authorization_code", "refresh_token"])
    }

    @Test func aConfidentialClientSendsItsSecretAsItsClientAuthSays() throws {
        let setup = try Setup(client: "ac-post")
        let (login, url) = try setup.startLogin()
        #expect(try setup.browse(url).status == 200)
        #expect(login.waitForExit(timeout: 20) == 0, "\(login.outputText)")
        let methods = try #require(try setup.stats()["auth_methods"] as? [[String]])
        #expect(methods.contains(["ac-post", "client_secret_post"]), "\(methods)")
        #expect(TextFile.read(setup.tokenFile) == (try setup.lastIssuedRefreshToken() ?? "?") + "\n")
        #expect(!login.outputText.contains("s3cret-ac"))
    }

    @Test func aForeignStateIsRefusedAndNothingIsStored() throws {
        let setup = try Setup(client: "ac-public")
        let (login, _) = try setup.startLogin()
        let forged = try Curl.run("http://127.0.0.1:\(setup.loginPort)/callback?code=stolen&state=not-ours", proxyURL: nil, caFile: nil,
                                  directory: setup.dir)
        #expect(forged.status == 400)
        let status = login.waitForExit(timeout: 20)
        #expect(status != nil && status != 0)
        #expect(login.outputText.contains("state does not match"))
        #expect(!FileManager.default.fileExists(atPath: setup.tokenFile))
    }

    /// A credential that cannot log in is named at its place in the file, with what to add.
    @Test func aCredentialWithoutALoginSaysWhereAndWhatToAdd() throws {
        let dir = try TemporaryDirectory("pinproxy-credentials-login")
        try dir.write("etc/pinproxy.yaml", """
            credentials:
              cc:
                kind: oauth2
                grant: client_credentials
                token_url: https://idp.example.test/token
                client_id: x
                client_secret: y
              rt:
                kind: oauth2
                grant: refresh_token
                token_url: https://idp.example.test/token
                client_id: x
                refresh_token_file: rt.token
            policies: policies
            """)
        try dir.write("etc/policies/none.yaml", "hosts: []\n")
        let config = dir.file("etc/pinproxy.yaml")
        let cc = try PinproxyBinary.run(["credentials", "login", "cc", "--config", config])
        #expect(cc.status == 1)
        #expect(cc.stderr.contains("pinproxy.yaml:2:3: credential cc has grant client_credentials"), "\(cc.stderr)")
        let rt = try PinproxyBinary.run(["credentials", "login", "rt", "--config", config])
        #expect(rt.status == 1)
        #expect(rt.stderr.contains("pinproxy.yaml:8:3: credential rt needs `authorize_url`"), "\(rt.stderr)")
        let typo = try PinproxyBinary.run(["credentials", "login", "rtt", "--config", config])
        #expect(typo.status == 1)
        #expect(typo.stderr.contains("unknown credential `rtt`; did you mean `rt`?"), "\(typo.stderr)")
    }
}
