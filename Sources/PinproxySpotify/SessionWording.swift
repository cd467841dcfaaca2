import PinproxyPolicy

/// How a token session's logs name it and its token endpoint: a
/// `spotify.sessions` entry keeps the Spotify wording operators and alerts
/// already match on ("Spotify token refresh failed"); a `credentials:` entry
/// is "credential NAME" and its endpoint "the token endpoint", never Spotify.
struct SessionWording: Sendable {
    let spotify: Bool
    let name: String

    init(_ config: SpotifySession) {
        spotify = config.tokenURL == nil
        name = config.name
    }

    /// "Spotify session" / "credential idp".
    var session: String { spotify ? "Spotify session" : "credential \(name)" }

    /// `token("access")`: "Spotify access token" / "access token of credential idp"; `token()`: "Spotify token" / "token of credential idp".
    func token(_ kind: String? = nil) -> String {
        let noun = kind.map { "\($0) token" } ?? "token"
        return spotify ? "Spotify \(noun)" : "\(noun) of credential \(name)"
    }

    /// "the accounts service" / "the token endpoint of credential idp".
    var endpoint: String { spotify ? "the accounts service" : "the token endpoint of credential \(name)" }

    /// The logger's metadata key naming the session.
    var metadataKey: String { spotify ? "spotify_session" : "credential" }
}
