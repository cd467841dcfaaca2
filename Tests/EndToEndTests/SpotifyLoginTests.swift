import Foundation
import PinproxyTestSupport
import Testing

/// `pinproxy spotify login` against the accounts mock, the browser played by
/// curl following the authorize redirect; then a `run` with the same config
/// serves tokens from the stored refresh token.
@Suite("spotify login end to end", .blockingWaits, .serialized)
struct SpotifyLoginTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let api: MockWebAPI
        let loginPort: Int
        let tokenFile: String
        let policies: String
        let mainConfig: String

        init(withSecret: Bool, accountsPinned: Bool = true) async throws {
            dir = try TemporaryDirectory("pinproxy-login")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.spotify.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            tokenFile = dir.file("user.token")
            loginPort = try freePort()
            let pins = Scenario.pins(try TestPKI.opensslSPKIPin(pki.intermediateCertificate), Scenario.backupPin)
            let accountsPins = accountsPinned ? pins : Scenario.pins("BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=", Scenario.backupPin)
            policies = Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), accountsPins),
                .intercept("api.spotify.test", upstream: .port(api.port), pins, "auth: { spotify: user }"),
            ], caFile: pki.rootCertificate)
            mainConfig = """
                \(ProxyHarness.baseMainConfig)
                network:
                  allow: [127.0.0.0/8]
                spotify:
                  accounts: https://accounts.spotify.test
                  token_timeout: 3s
                  sessions:
                    user:
                      flow: refresh_token
                      client_id: \(accounts.clientID)
                \(withSecret ? "      client_secret_file: ../secret.txt\n" : "")      refresh_token_file: ../user.token
                      redirect_uri: http://127.0.0.1:\(loginPort)/callback
                """
            try dir.write("etc/pinproxy.yaml", mainConfig)
            try dir.write("etc/policies/test.yaml", policies)
        }

        /// Starts `spotify login user`; returns it and the authorize URL it printed.
        func startLogin() throws -> (ChildProcess, String) {
            try LoginDriver.start(["spotify", "login", "user"], config: dir.file("etc/pinproxy.yaml"), in: dir,
                                  authorizePrefix: "https://accounts.spotify.test/authorize?")
        }

        /// The browser: open the URL, follow the redirect to the callback.
        func browse(_ url: String) throws -> CurlResult {
            try LoginDriver.browse(url, host: "accounts.spotify.test", port: accounts.port, caFile: pki.rootCertificate, in: dir)
        }
    }

    @Test func aPKCELoginStoresTheRefreshTokenAndRunServesTokensWithIt() async throws {
        let setup = try await Setup(withSecret: false)
        let (login, url) = try setup.startLogin()
        #expect(url.contains("response_type=code"))
        #expect(url.contains("code_challenge_method=S256"))
        #expect(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A\(setup.loginPort)%2Fcallback"))
        #expect(url.contains("state="))
        let page = try setup.browse(url)
        #expect(page.status == 200, "\(page.body)")
        #expect(page.body.contains("authorised"))
        #expect(login.waitForExit(timeout: 20) == 0, "\(login.outputText)")

        let issued = try #require(setup.accounts.counters.lastIssuedRefreshToken)
        #expect(try String(contentsOfFile: setup.tokenFile, encoding: .utf8) == issued + "\n")
        #expect(TextFile.permissions(setup.tokenFile) == 0o600)
        #expect(!login.outputText.contains(issued), "the refresh token is not printed")

        let proxy = try ProxyHarness(policies: setup.policies, mainConfig: setup.mainConfig, directory: setup.dir)
        let result = try Curl.run("https://api.spotify.test/v1/me", proxy: proxy, directory: setup.dir)
        #expect(result.status == 200, "\(result.body) \(proxy.log)")
        #expect(setup.accounts.counters.byGrantType["refresh_token"] == 1)
        #expect(setup.api.authorizationHeaders.last == "Bearer \(setup.accounts.counters.lastIssuedAccessToken ?? "?")")
    }

    @Test func aLoginWithAClientSecretUsesBasicAuth() async throws {
        let setup = try await Setup(withSecret: true)
        let (login, url) = try setup.startLogin()
        #expect(try setup.browse(url).status == 200)
        #expect(login.waitForExit(timeout: 20) == 0, "\(login.outputText)")
        #expect(try String(contentsOfFile: setup.tokenFile, encoding: .utf8) == (setup.accounts.counters.lastIssuedRefreshToken ?? "?") + "\n")
    }

    @Test func aForeignStateIsRefusedAndNothingIsStored() async throws {
        let setup = try await Setup(withSecret: false)
        let (login, _) = try setup.startLogin()
        let forged = try Curl.run("http://127.0.0.1:\(setup.loginPort)/callback?code=stolen&state=not-ours", proxyURL: nil, caFile: nil, directory: setup.dir)
        #expect(forged.status == 400)
        let status = login.waitForExit(timeout: 20)
        #expect(status != nil && status != 0)
        #expect(login.outputText.contains("state does not match"))
        #expect(!FileManager.default.fileExists(atPath: setup.tokenFile))
        #expect(setup.accounts.counters.tokenRequests == 0)
    }

    @Test func aRefusalInTheBrowserExitsNonZero() async throws {
        let setup = try await Setup(withSecret: false)
        setup.accounts.update { $0.denyAuthorization = true }
        let (login, url) = try setup.startLogin()
        #expect(try setup.browse(url).status == 400)
        let status = login.waitForExit(timeout: 20)
        #expect(status != nil && status != 0)
        #expect(login.outputText.contains("access_denied"))
        #expect(!FileManager.default.fileExists(atPath: setup.tokenFile))
    }

    @Test func theCodeExchangeObeysTheAccountsHostsPins() async throws {
        let setup = try await Setup(withSecret: true, accountsPinned: false)
        let (login, url) = try setup.startLogin()
        #expect(try setup.browse(url).status == 400)
        let status = login.waitForExit(timeout: 20)
        #expect(status != nil && status != 0)
        #expect(setup.accounts.counters.tokenRequests == 0, "the code and the secret never left pinproxy")
        #expect(!FileManager.default.fileExists(atPath: setup.tokenFile))
    }
}
