import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyAdmin
import PinproxyPolicy
import PinproxyServer
import PinproxySessionStore
import PinproxySpotify
import PinproxyTLS

/// What a browser login authorises, resolved from the configuration by
/// `credentials login` or its alias `spotify login`.
struct LoginTarget {
    var session: SpotifySession
    /// The provider's authorization endpoint (Spotify's: `{accounts}/authorize`).
    var authorizeURL: String
    var redirectURI: String
    var redirect: LoopbackRedirect
    /// nil: the authorize request names no scope (the provider's default applies).
    var scope: String?
}

/// The authorization-code login with PKCE S256 (docs/contract.md §7), for
/// any `refresh_token` token session: prints the authorize URL, waits on the
/// `redirect_uri` for the browser, exchanges the code through the token
/// host's policy and pins, stores the refresh token (file or session store).
struct LoginFlow {
    /// The command as the operator typed it, which prefixes every error.
    let command: String

    enum Outcome: Sendable {
        case stored(path: String)
        case failed(String)
    }

    /// The configuration `run` would serve with, or exit.
    func load(config: String?) -> PolicyStore {
        if let config, !FileManager.default.fileExists(atPath: config) {
            fail("config file \(config) does not exist", code: 2)
        }
        switch PolicyStore.load(PolicyLoader(configFile: config)) {
        case .failure(let failure):
            failure.diagnostics.forEach { standardError($0.description) }
            fail("the configuration is invalid")
        case .success(let loaded):
            return loaded
        }
    }

    func run(_ target: LoginTarget, store: PolicyStore) async {
        let spotify = store.snapshot.config.spotify
        var logger = Logger(label: "pinproxy")
        logger.logLevel = .warning
        // The token call goes through the proxy's own path (policy, pins, SSRF
        // guard) without a listener: nothing is intercepted, so an ephemeral CA will do.
        let proxy: ProxyServer
        do {
            proxy = try ProxyServer(store: store, ca: try CertificateAuthority.create(commonName: "pinproxy login (ephemeral)"),
                                    logger: logger, accessLog: logger)
        } catch {
            fail("cannot set up the path to the token endpoint: \(error)")
        }
        // With a store, the refresh token goes there (docs/contract.md §12); its pool runs while we wait.
        var sharedStore: PostgresSessionStore?
        if let storeConfig = spotify.store {
            do {
                sharedStore = try PostgresSessionStore(config: storeConfig, logger: logger, leaseTimeout: .seconds(10))
            } catch {
                fail("cannot set up the session store: \(error)")
            }
        }
        let storeTask = sharedStore.map { store in Task { try? await store.run() } }
        defer { storeTask?.cancel() }
        let exchange = AuthorizationCodeExchange(
            session: target.session, endpoint: ProxiedTokenEndpoint.of(target.session, spotify: spotify, proxy: proxy), shared: sharedStore)
        let request = AuthorizationRequest()
        let url = request.url(authorize: target.authorizeURL, clientID: target.session.clientID, redirectURI: target.redirectURI,
                              scope: target.scope)

        let outcome = NIOLockedValueBox<Outcome?>(nil)
        let callback = target.redirect
        do {
            try await LoginCallbackServer.serve(
                host: callback.host, port: callback.port, path: callback.path, logger: logger,
                onListening: { _ in
                    say("Open this URL in a browser and authorise the app:\n\n\(url)\n\nWaiting for the redirect on \(target.redirectURI) …")
                },
                handle: { query in
                    let result = await Self.answer(query, expectedState: request.state, verifier: request.verifier, exchange: exchange)
                    outcome.withLockedValue { $0 = result }
                    return Self.page(result)
                })
        } catch {
            fail("cannot listen on \(callback.host):\(callback.port): \(error)")
        }
        switch outcome.withLockedValue({ $0 }) {
        case .stored(let path)?:
            say("Stored the refresh token of session \(target.session.name) in \(path).")
        case .failed(let reason)?:
            fail(reason)
        case nil:
            fail("stopped before the browser came back")
        }
    }

    /// The redirect, judged: `state` first (a forged redirect gets nothing), then `error`, then the code.
    static func answer(_ query: [(String, String)], expectedState: String, verifier: String,
                       exchange: AuthorizationCodeExchange) async -> Outcome {
        func field(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
        guard field("state") == expectedState else {
            return .failed("the redirect's state does not match this login attempt (a stale tab or a forged redirect); nothing was stored")
        }
        if let error = field("error") {
            return .failed("authorisation was refused: \(error)")
        }
        guard let code = field("code"), !code.isEmpty else {
            return .failed("the redirect carried neither a code nor an error")
        }
        do {
            return .stored(path: try await exchange.exchange(code: code, verifier: verifier))
        } catch {
            return .failed(error.description)
        }
    }

    static func page(_ outcome: Outcome) -> LoginCallbackServer.Page {
        switch outcome {
        case .stored:
            return .init(status: 200, html: "<!doctype html><title>pinproxy</title><p>pinproxy is authorised. You can close this tab.</p>\n")
        case .failed(let reason):
            let escaped = reason.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
            return .init(status: 400, html: "<!doctype html><title>pinproxy</title><p>pinproxy login failed: \(escaped)</p>\n")
        }
    }

    /// One line to standard output, written at once (no stdio buffering to flush).
    func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    func fail(_ message: String, code: Int32 = 1) -> Never {
        standardError("\(command): \(message)")
        Foundation.exit(code)
    }
}
