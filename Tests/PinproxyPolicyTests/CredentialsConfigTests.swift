import Foundation
import PinproxyPolicy
import Testing

/// `credentials:` and the `auth` that names them (docs/contract.md §3
/// Credentials): what is read, and each mistake at its line and column.
struct CredentialsConfigTests {
    static let main = """
        policies: policies
        clients:
          identities:
            billing: {password_hash: "$pbkdf2-sha256$i=20000$q/3PFeigD2olhKgT5+di6g==$xeShPosPiwszDBryxVFmmL1RNITxH2SNLJ0okWwoDf8="}
        credentials:
          github: {kind: static, value_file: gh-token}
          idp:
            kind: oauth2
            token_url: https://idp.example.com/oauth/token
            grant: client_credentials
            client_id: app
            client_secret: ${IDP_SECRET}
            client_auth: post
            scope: "read write"
            audience: https://api.example.com
            extra: {prompt: none}
        """

    static func policy(_ auth: String) -> String {
        """
        hosts:
          - match: api.example.com
            pins:
              spki_sha256: [{pin: "\(Fixture.pin(1))"}, {pin: "\(Fixture.pin(2))"}]
        \(auth.isEmpty ? "" : "    auth: " + auth)
        """
    }

    func load(main: String = Self.main, _ auth: String) throws -> (errors: [String], snapshot: PolicySnapshot?) {
        let tree = try ConfigTree(main: main, policies: ["p.yaml": Self.policy(auth)])
        let result = tree.loader(environment: ["IDP_SECRET": "s3cret"]).load()
        return (tree.rendered(result.errors), result.snapshot)
    }

    /// The errors alone, evaluated before `#expect` so that a failure shows them.
    func errors(main: String = Self.main, _ auth: String) -> [String] {
        (try? load(main: main, auth).errors) ?? ["the tree could not be written"]
    }

    @Test func readsBothKindsAndTheInjection() throws {
        let (errors, snapshot) = try load("{credential: github, header: X-Api-Key, format: \"{token}\"}")
        #expect(errors == [])
        let config = try #require(snapshot?.config)
        let idp = try #require(config.credentials.oauth2["idp"])
        #expect(idp.tokenURL == "https://idp.example.com/oauth/token")
        #expect(idp.clientAuth == .post)
        #expect(idp.scope == "read write")
        #expect(idp.audience == "https://api.example.com")
        #expect(idp.extraParameters == [.init(name: "prompt", value: "none")])
        #expect(config.credentials.statics["github"] != nil)
        let auth = try #require(snapshot?.policy(forHost: "api.example.com")?.spec.auth)
        #expect(auth.choice == .named("github"))
        #expect(auth.header == "X-Api-Key")
        #expect(auth.headerValue(token: "t") == "t")
    }

    @Test func spotifyIsAnotherSpellingOfCredential() throws {
        let main = Self.main + "\nspotify:\n  sessions:\n    app: {client_id: a, client_secret: b}\n"
        let (errors, snapshot) = try load(main: main, "{spotify: app}")
        #expect(errors == [])
        let auth = try #require(snapshot?.policy(forHost: "api.example.com")?.spec.auth)
        #expect(auth == AuthPolicy(spotifySession: "app", replaceClientAuth: true, attachUnpinned: false))
        #expect(auth.header == "Authorization" && auth.headerValue(token: "t") == "Bearer t")
    }

    /// `format:` puts the token at each `{token}` and nowhere else: a token
    /// that itself reads `{token}` is not expanded again, and the text around
    /// the markers stays byte for byte.
    @Test func formatPutsTheTokenAtEachMarker() {
        #expect(AuthPolicy.headerValue(format: "Bearer {token}", token: "abc") == "Bearer abc")
        #expect(AuthPolicy.headerValue(format: "{token}", token: "abc") == "abc")
        #expect(AuthPolicy.headerValue(format: "k={token}; again={token}", token: "t") == "k=t; again=t")
        #expect(AuthPolicy.headerValue(format: "Bearer {token}", token: "{token}") == "Bearer {token}")
        #expect(AuthPolicy.headerValue(format: "{tok{token}en}", token: "Z") == "{tokZen}")
        #expect(AuthPolicy.headerValue(format: "Token {token} ✓", token: "é") == "Token é ✓")
        #expect(AuthPolicy.headerValue(format: "{{token}}", token: "T") == "{T}")
        #expect(AuthPolicy.headerValue(format: "{token", token: "T") == "{token")
        #expect(AuthPolicy.headerValue(format: "", token: "T") == "")
    }

    @Test func byClientResolvesPerIdentity() throws {
        let (errors, snapshot) = try load("{by_client: {billing: idp}, require: true}")
        #expect(errors == [])
        let auth = try #require(snapshot?.policy(forHost: "api.example.com")?.spec.auth)
        #expect(auth.resolve(identity: "billing") == .credential("idp"))
        #expect(auth.resolve(identity: "reports") == .denied)
        #expect(auth.resolve(identity: nil) == .denied)
        let open = AuthPolicy(choice: .byClient(["billing": "idp"], fallback: nil, require: false))
        #expect(open.resolve(identity: "reports") == .none)
        let fallback = AuthPolicy(choice: .byClient(["billing": "idp"], fallback: "github", require: false))
        #expect(fallback.resolve(identity: nil) == .credential("github"))
    }

    @Test func unknownCredentialIsNamedAtItsPlaceWithTheNearestName() throws {
        #expect(errors("{credential: githb}") == ["policies/p.yaml:5:24: error: unknown credential `githb`; did you mean `github`?"])
        #expect(errors("{by_client: {billing: ipd, biling: idp}}") == [
            "policies/p.yaml:5:33: error: unknown credential `ipd`; did you mean `idp`?",
            "policies/p.yaml:5:46: error: `by_client` maps unknown client identity `biling`; did you mean `billing`?",
        ])
    }

    @Test func authMistakesAreErrors() throws {
        #expect(errors("{credential: github, spotify: app}")
            == ["policies/p.yaml:5:32: error: `auth` takes one of `credential`, `spotify` and `by_client`, not both `credential` and `spotify`"])
        #expect(errors("{credential: github, format: \"Bearer\"}")
            == ["policies/p.yaml:5:40: error: `format` must contain `{token}`, where the credential goes (e.g. \"token {token}\")"])
        #expect(errors("{credential: github, require: true}")
            == ["policies/p.yaml:5:32: error: `require` applies only with `by_client`: `credential` gives every client the same credential"])
    }

    @Test func credentialMistakesAreErrorsAtTheirKey() throws {
        let main = """
            policies: policies
            credentials:
              a: {kind: static, token_url: "https://x"}
              b: {kind: oauth2, token_url: "http://idp.example.com/t", grant: client_credentials, client_id: x, client_secret: y}
              c: {kind: oauth2, token_url: "https://idp.example.com/t", grant: refresh_token, client_id: x}
              d: {value: x}
            """
        let (errors, _) = try load(main: main, "")
        #expect(errors == [
            "pinproxy.yaml:3:3: error: credential `a` (kind static) needs `value_file` (a file holding the secret) or `value: ${VARIABLE}`",
            "pinproxy.yaml:3:21: error: `token_url` does not apply to `kind: static`; its keys are kind, value, value_file",
            "pinproxy.yaml:4:32: error: `token_url` must be an https:// URL: the token request sends the client secret, which must not travel in clear; write `https://idp.example.com/t`",
            "pinproxy.yaml:5:3: error: credential `c` (grant refresh_token) needs `refresh_token_file`, or a `spotify.store` to keep its refresh token in",
            "pinproxy.yaml:6:3: error: credential `d` needs `kind`: `static` (a fixed secret) or `oauth2` (a token from a token endpoint)",
        ])
    }

    @Test func aNameDefinedTwiceIsAnError() throws {
        let main = "policies: policies\nspotify:\n  sessions:\n    app: {client_id: a, client_secret: b}\ncredentials:\n  app: {kind: static, value: x}\n"
        #expect(errors(main: main, "{credential: app}")
            == ["pinproxy.yaml:6:3: error: credential `app` is also a `spotify.sessions` entry, which is listed among the credentials by that name: rename one of them"])
    }

    /// `authorize_url` and `redirect_uri` make `pinproxy credentials login` possible; each mistake at its place.
    @Test func loginKeysAreReadAndTheirMistakesAreErrors() throws {
        let good = """
            policies: policies
            credentials:
              user:
                kind: oauth2
                grant: refresh_token
                token_url: https://idp.example.com/token
                authorize_url: https://idp.example.com/authorize?audience=api
                redirect_uri: http://127.0.0.1:8765/callback
                client_id: x
                refresh_token_file: user.token
            """
        let (errors, snapshot) = try load(main: good, "")
        #expect(errors == [])
        let user = try #require(snapshot?.config.credentials.oauth2["user"])
        #expect(user.authorizeURL == "https://idp.example.com/authorize?audience=api")
        #expect(user.redirectURI == "http://127.0.0.1:8765/callback")
        #expect(user.reauthorizeHint == "run `pinproxy credentials login user`")

        let bad = """
            policies: policies
            credentials:
              a: {kind: oauth2, grant: refresh_token, token_url: "https://i/t", client_id: x, refresh_token_file: f,
                  authorize_url: "http://idp.example.com/authorize", redirect_uri: "https://app.example.com/cb"}
              b: {kind: oauth2, grant: client_credentials, token_url: "https://i/t", client_id: x, client_secret: y,
                  authorize_url: "https://i/a"}
              c: {kind: oauth2, grant: refresh_token, token_url: "https://i/t", client_id: x, refresh_token_file: f,
                  authorize_url: "https://i/a"}
            """
        let (badErrors, _) = try load(main: bad, "")
        #expect(badErrors == [
            "pinproxy.yaml:4:22: error: `authorize_url` must be an https:// URL: the browser signs in there; over http:// a network attacker could show a forged page; write `https://idp.example.com/authorize`",
            "pinproxy.yaml:4:72: error: `redirect_uri` must be http:// on a loopback address, such as http://127.0.0.1:8765/callback, where `pinproxy credentials login` listens for the browser; not `https://app.example.com/cb`",
            "pinproxy.yaml:6:7: error: `authorize_url` applies to `grant: refresh_token` only: a client_credentials grant needs no login",
            "pinproxy.yaml:7:3: error: credential `c` has `authorize_url` but no `redirect_uri`: `pinproxy credentials login` needs both",
        ])
    }

    /// `throttle_queue`: read, and bounded at its place.
    @Test func throttleQueueIsReadAndBounded() throws {
        let (errors, snapshot) = try load("{credential: github, throttle_queue: 20}")
        #expect(errors == [])
        #expect(snapshot?.policy(forHost: "api.example.com")?.spec.auth?.throttleQueue == 20)
        #expect(self.errors("{credential: github, throttle_queue: 20000}") == [
            "policies/p.yaml:5:48: error: `throttle_queue` is at most 10000: each waiting request holds a client connection; beyond the queue, requests get 429 `upstream_throttled` at once",
        ])
    }
}
