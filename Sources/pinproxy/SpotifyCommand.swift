import ArgumentParser
import Foundation
import PinproxyPolicy

/// `pinproxy spotify …`: Spotify session chores.
struct SpotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spotify",
        abstract: "Spotify sessions: authorise a refresh_token session.",
        subcommands: [SpotifyLoginCommand.self])
}

/// `pinproxy spotify login SESSION` (docs/contract.md §7): the alias of
/// `pinproxy credentials login` for a `spotify.sessions` entry, whose
/// authorize URL is `{spotify.accounts}/authorize`. The flow is `LoginFlow`.
struct SpotifyLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Authorise a refresh_token session in a browser and store its refresh token (an alias of `credentials login`).")

    @Argument(help: "The session's name under spotify.sessions.")
    var session: String

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "The scopes to ask for, space-separated.")
    var scope: String = defaultScope

    static let defaultScope = "user-read-private user-read-email"

    func run() async throws {
        let flow = LoginFlow(command: "pinproxy spotify login")
        let store = flow.load(config: config)
        await flow.run(Self.target(session, scope: scope, in: store.snapshot.config, flow: flow), store: store)
    }

    /// A `spotify.sessions` entry that can log in, or an error that says what to add.
    static func target(_ session: String, scope: String?, in config: PinproxyConfig, flow: LoginFlow) -> LoginTarget {
        let spotify = config.spotify
        guard let sessionConfig = spotify.sessions[session] else {
            let file = config.file ?? "the embedded defaults"
            if spotify.sessions.isEmpty {
                flow.fail("no Spotify session named \(session): \(file) defines no spotify.sessions; add one with flow: refresh_token, "
                          + "a refresh_token_file and a redirect_uri (etc/pinproxy.yaml has a commented example; docs/policies.md explains them)")
            }
            flow.fail("no Spotify session named \(session) in \(file) (known: \(spotify.sessions.keys.sorted().joined(separator: ", ")))")
        }
        guard sessionConfig.flow == .refreshToken, sessionConfig.refreshTokenFile != nil || spotify.store != nil else {
            flow.fail("session \(session) is not a refresh_token session with a refresh_token_file or a spotify.store")
        }
        guard let redirectURI = sessionConfig.redirectURI, let redirect = LoopbackRedirect(redirectURI) else {
            flow.fail("session \(session) needs a redirect_uri of the form http://127.0.0.1:PORT/PATH (a loopback address)")
        }
        let accounts = spotify.accounts.hasSuffix("/") ? String(spotify.accounts.dropLast()) : spotify.accounts
        return LoginTarget(session: sessionConfig, authorizeURL: accounts + "/authorize", redirectURI: redirectURI,
                           redirect: redirect, scope: scope ?? defaultScope)
    }
}
