import ArgumentParser
import Foundation
import PinproxyPolicy

/// `pinproxy credentials …`: credential chores.
struct CredentialsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credentials",
        abstract: "Credentials: authorise a refresh_token credential in a browser.",
        subcommands: [CredentialsLoginCommand.self])
}

/// `pinproxy credentials login NAME` (docs/contract.md §2, §3 Credentials):
/// the browser login for a `kind: oauth2` credential with `grant:
/// refresh_token`, `authorize_url` and `redirect_uri`, or for a
/// `spotify.sessions` entry of flow `refresh_token` (the preset).
struct CredentialsLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Authorise a refresh_token credential in a browser (PKCE) and store its refresh token.")

    @Argument(help: "The credential's name under credentials: (or spotify.sessions).")
    var name: String

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "The scopes to ask for, space-separated (default: the credential's scope; Spotify's: user-read-private user-read-email).")
    var scope: String?

    func run() async throws {
        let flow = LoginFlow(command: "pinproxy credentials login")
        let store = flow.load(config: config)
        let loaded = store.snapshot.config
        if loaded.spotify.sessions[name] != nil {
            await flow.run(SpotifyLoginCommand.target(name, scope: scope, in: loaded, flow: flow), store: store)
            return
        }
        await flow.run(Self.target(name, scope: scope, in: loaded, flow: flow), store: store)
    }

    /// A `credentials:` entry that can log in, or an error that says what to add and where.
    static func target(_ name: String, scope: String?, in config: PinproxyConfig, flow: LoginFlow) -> LoginTarget {
        let file = config.file ?? "the embedded defaults"
        guard let credential = config.credentials.oauth2[name] else {
            if config.credentials.statics[name] != nil {
                flow.fail("credential \(name) is kind static: its value is the file or variable it names, there is nothing to log in to")
            }
            let known = config.tokenSessions.keys.sorted()
            if known.isEmpty {
                flow.fail("no credential named \(name): \(file) defines no `credentials:` of kind oauth2; add one with grant: refresh_token, "
                          + "authorize_url, redirect_uri and a refresh_token_file (docs/policies.md explains them)")
            }
            flow.fail("\(file): " + unknownCredentialMessage(name, known: known))
        }
        let at = "\(credential.location)"
        guard credential.flow == .refreshToken else {
            flow.fail("\(at): credential \(name) has grant \(credential.flow.rawValue); only a grant: refresh_token credential logs in")
        }
        guard let authorize = credential.authorizeURL, let redirectURI = credential.redirectURI,
              let redirect = LoopbackRedirect(redirectURI) else {
            flow.fail("\(at): credential \(name) needs `authorize_url` (the provider's authorization endpoint) and `redirect_uri` "
                      + "(http://127.0.0.1:PORT/PATH, registered with the provider) to log in")
        }
        return LoginTarget(session: credential, authorizeURL: authorize, redirectURI: redirectURI, redirect: redirect,
                           scope: scope ?? credential.scope)
    }
}
