import Foundation
import PinproxyTLS
import Yams

/// Reads `spotify:`: the token endpoint, the sessions host policies name,
/// and the swap backend. Checks each session is complete for its flow, so a
/// missing secret is a `check` error rather than a 503 at the first request.
struct SpotifyConfigReader {
    func read(_ spotify: MappingReader, into config: inout PinproxyConfig) {
        let table = ConfigKeys.main
        let bag = spotify.reader.bag
        spotify.record(into: &config.sourceMap)
        // Read first: with a store, a refresh_token session needs no file.
        if let store = spotify.child("store", table: table) {
            store.record(into: &config.sourceMap)
            config.spotify.store = SpotifyStoreReader().read(store)
        }
        let hasStore = spotify.has("store")
        if let v = spotify.nonEmptyString("accounts") {
            let url = URL(string: v)
            let scheme = url?.scheme?.lowercased()
            if scheme == "https", url?.host != nil {
                config.spotify.accounts = v.hasSuffix("/") ? String(v.dropLast()) : v
            } else if scheme == "http", url?.host != nil {
                // The token request carries the client secret (HTTP Basic) and
                // returns bearer tokens: never over plain HTTP.
                bag.error(spotify.valueLocation("accounts"),
                          "`spotify.accounts` must be an https:// URL: the token request sends the client secret, which must not travel in clear; write `https://\(v.dropFirst("http://".count))`")
            } else {
                bag.error(spotify.valueLocation("accounts"), "`spotify.accounts` must be an https:// URL such as https://accounts.spotify.com, not `\(v)`")
            }
        }
        if let v = spotify.duration("token_timeout", allowZero: false) { config.spotify.tokenTimeout = v }
        if let sessionsNode = spotify.node("sessions"),
           let sessions = MappingReader(sessionsNode, reader: spotify.reader, key: "sessions", schemaPath: "spotify.sessions", mapPrefix: "spotify.sessions.", known: nil) {
            sessions.record(into: &config.sourceMap)
            for entry in sessions.entries {
                guard let session = MappingReader(entry.value, reader: spotify.reader, key: entry.key, schemaPath: "spotify.sessions.*",
                                                  mapPrefix: "spotify.sessions.\(entry.key).", table: table) else { continue }
                session.record(into: &config.sourceMap)
                if let parsed = readSession(entry.key, session, at: spotify.reader.location(entry.keyNode), hasStore: hasStore) {
                    config.spotify.sessions[entry.key] = parsed
                }
            }
        }
        if let swap = spotify.child("swap", table: table) {
            swap.record(into: &config.sourceMap)
            config.spotify.swap = readSwap(swap, sessions: config.spotify.sessions, sessionsWritten: spotify.has("sessions"))
        }
    }

    func secret(_ m: MappingReader, inline: String, file: String) -> SecretSource?? {
        let bag = m.reader.bag
        if m.has(inline), m.has(file) {
            bag.error(m.keyLocation(file), "give either `\(inline)` or `\(file)`, not both")
            return .some(nil)
        }
        if m.has(inline) {
            guard let value = m.nonEmptyString(inline) else { return .some(nil) }
            return .inline(Secret(value))
        }
        if m.has(file) {
            guard let path = m.path(file) else { return .some(nil) }
            return .file(path)
        }
        return nil
    }

    private func readSession(_ name: String, _ m: MappingReader, at location: SourceLocation, hasStore: Bool) -> SpotifySession? {
        let bag = m.reader.bag
        let flow = m.has("flow") ? m.choice("flow", SpotifySession.Flow.self) : .clientCredentials
        let clientID = m.nonEmptyString("client_id")
        if !m.has("client_id") {
            bag.error(location, "Spotify session `\(name)` needs `client_id`")
        }
        let secretResult = secret(m, inline: "client_secret", file: "client_secret_file")
        let secret: SecretSource? = secretResult ?? nil
        let refreshTokenFile = m.path("refresh_token_file")
        switch flow {
        case .clientCredentials?:
            if secretResult == nil {
                bag.error(location, "Spotify session `\(name)` (flow client_credentials) needs `client_secret` or `client_secret_file`")
            }
        case .refreshToken?:
            if !m.has("refresh_token_file"), !hasStore {
                bag.error(location, "Spotify session `\(name)` (flow refresh_token) needs `refresh_token_file`, or a `spotify.store` to keep its refresh token in")
            }
        case nil:
            break
        }
        let refreshBefore = m.duration("refresh_before") ?? .seconds(300)
        let redirectURI = m.nonEmptyString("redirect_uri")
        guard let flow, let clientID, secretResult != .some(nil) else { return nil }
        return SpotifySession(
            name: name, flow: flow, clientID: clientID, clientSecret: secret, refreshTokenFile: refreshTokenFile,
            refreshBefore: refreshBefore, redirectURI: redirectURI, location: location)
    }

    private func readSwap(_ m: MappingReader, sessions: [String: SpotifySession], sessionsWritten: Bool) -> SpotifySwap? {
        let bag = m.reader.bag
        for required in ["listen", "session", "redirect_uri"] where !m.has(required) {
            bag.error(m.location, "`spotify.swap` needs `\(required)`")
        }
        let listen = m.hostPort("listen")
        let session = m.nonEmptyString("session")
        if let session, sessions[session] == nil {
            bag.error(m.valueLocation("session"), unknownSessionMessage(session, known: Array(sessions.keys)))
        }
        let redirectURI = m.nonEmptyString("redirect_uri")
        let keyResult = secret(m, inline: "key", file: "key_file")
        if keyResult == nil {
            bag.error(m.location, "`spotify.swap` needs `key` or `key_file` (base64 of 32 bytes: `openssl rand -base64 32`)")
        }
        if case .inline(let key)?? = keyResult, Base64.decode(key.reveal())?.count != 32 {
            bag.error(m.valueLocation("key"), "`key` must be base64 of 32 bytes (`openssl rand -base64 32`)")
        }
        let legacy = m.path("legacy_secret_file")
        guard let listen, let session, sessions[session] != nil, let redirectURI, let key = keyResult ?? nil else { return nil }
        return SpotifySwap(listen: listen, session: session, redirectURI: redirectURI, key: key,
                           legacySecretFile: legacy, location: m.location)
    }
}

/// Shared by `auth.spotify` and `spotify.swap.session`.
func unknownSessionMessage(_ name: String, known: [String]) -> String {
    if known.isEmpty {
        return "unknown Spotify session `\(name)`: `spotify.sessions` defines none"
    }
    let hint = KeySuggestion.nearest(to: name, in: known).map { "; did you mean `\($0)`?" }
        ?? "; defined: \(known.sorted().joined(separator: ", "))"
    return "unknown Spotify session `\(name)`\(hint)"
}
