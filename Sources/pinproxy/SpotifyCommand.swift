import ArgumentParser
import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyAdmin
import PinproxyPolicy
import PinproxyServer
import PinproxySessionStore
import PinproxySpotify
import PinproxyTLS

/// `pinproxy spotify …`: Spotify session chores.
struct SpotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spotify",
        abstract: "Spotify sessions: authorise a refresh_token session.",
        subcommands: [SpotifyLoginCommand.self])
}

/// `pinproxy spotify login SESSION` (docs/contract.md §7): authorization code with
/// PKCE S256. Prints the authorize URL, waits on the session's
/// `redirect_uri` for the browser, exchanges the code through the accounts
/// host's policy and pins, stores the refresh token, exits 0.
struct SpotifyLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Authorise a refresh_token session in a browser and store its refresh token.")

    @Argument(help: "The session's name under spotify.sessions.")
    var session: String

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "The scopes to ask for, space-separated.")
    var scope: String = "user-read-private user-read-email"

    enum Outcome: Sendable {
        case stored(path: String)
        case failed(String)
    }

    func run() async throws {
        if let config, !FileManager.default.fileExists(atPath: config) {
            fail("config file \(config) does not exist", code: 2)
        }
        let store: PolicyStore
        switch PolicyStore.load(PolicyLoader(configFile: config)) {
        case .failure(let failure):
            failure.diagnostics.forEach { standardError($0.description) }
            fail("the configuration is invalid")
        case .success(let loaded):
            store = loaded
        }
        let spotify = store.snapshot.config.spotify
        guard let sessionConfig = spotify.sessions[session] else {
            let file = store.snapshot.config.file ?? "the embedded defaults"
            if spotify.sessions.isEmpty {
                fail("no Spotify session named \(session): \(file) defines no spotify.sessions; add one with flow: refresh_token, "
                     + "a refresh_token_file and a redirect_uri (etc/pinproxy.yaml has a commented example; docs/policies.md explains them)")
            }
            fail("no Spotify session named \(session) in \(file) (known: \(spotify.sessions.keys.sorted().joined(separator: ", ")))")
        }
        guard sessionConfig.flow == .refreshToken, sessionConfig.refreshTokenFile != nil || spotify.store != nil else {
            fail("session \(session) is not a refresh_token session with a refresh_token_file or a spotify.store")
        }
        guard let redirectURI = sessionConfig.redirectURI, let callback = Callback(redirectURI) else {
            fail("session \(session) needs a redirect_uri of the form http://127.0.0.1:PORT/PATH (a loopback address)")
        }

        var logger = Logger(label: "pinproxy")
        logger.logLevel = .warning
        // The token call goes through the proxy's own path (policy, pins, SSRF
        // guard) without a listener: nothing is intercepted, so an ephemeral CA will do.
        let proxy: ProxyServer
        do {
            proxy = try ProxyServer(store: store, ca: try CertificateAuthority.create(commonName: "pinproxy login (ephemeral)"),
                                    logger: logger, accessLog: logger)
        } catch {
            fail("cannot set up the path to the accounts service: \(error)")
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
            session: sessionConfig,
            endpoint: ProxiedTokenEndpoint(proxy: proxy, accounts: spotify.accounts, timeout: spotify.tokenTimeout),
            shared: sharedStore)
        let request = AuthorizationRequest()
        let url = request.url(accounts: spotify.accounts, clientID: sessionConfig.clientID, redirectURI: redirectURI, scope: scope)

        let outcome = NIOLockedValueBox<Outcome?>(nil)
        do {
            try await LoginCallbackServer.serve(
                host: callback.host, port: callback.port, path: callback.path, logger: logger,
                onListening: { _ in
                    say("Open this URL in a browser and authorise the app:\n\n\(url)\n\nWaiting for the redirect on \(redirectURI) …")
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
            say("Stored the refresh token of session \(session) in \(path).")
            storeTask?.cancel()
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
        standardError("pinproxy spotify login: \(message)")
        Foundation.exit(code)
    }

    /// Where to listen, from `redirect_uri`: plain HTTP on a loopback address.
    struct Callback {
        var host: String
        var port: Int
        var path: String

        init?(_ uri: String) {
            guard let components = URLComponents(string: uri), components.scheme == "http",
                  let rawHost = components.host else { return nil }
            let host = rawHost.hasPrefix("[") ? String(rawHost.dropFirst().dropLast()) : rawHost
            guard ["127.0.0.1", "localhost", "::1"].contains(host) else { return nil }
            self.host = host == "localhost" ? "127.0.0.1" : host
            self.port = components.port ?? 80
            self.path = components.path.isEmpty ? "/" : components.path
        }
    }
}
