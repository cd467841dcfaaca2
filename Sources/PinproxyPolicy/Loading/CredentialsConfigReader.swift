import Foundation

/// Reads `credentials:` (docs/contract.md §3): each entry's `kind` decides
/// which keys apply, and an entry is checked complete for its kind so that
/// a missing secret is a `check` error rather than a 503 at the first request.
struct CredentialsConfigReader {
    static let staticKeys: Set<String> = ["kind", "value", "value_file"]
    static let oauth2Keys: Set<String> = [
        "kind", "token_url", "grant", "client_id", "client_secret", "client_secret_file", "client_auth", "scope",
        "audience", "resource", "extra", "refresh_token_file", "refresh_before", "authorize_url", "redirect_uri",
    ]

    enum Kind: String, CaseIterable {
        case staticValue = "static"
        case oauth2
    }

    /// `entries` is the `credentials:` mapping, read with any key allowed (the names are the operator's).
    func read(_ entries: MappingReader, into config: inout PinproxyConfig) {
        entries.record(into: &config.sourceMap)
        let hasStore = config.spotify.store != nil
        for entry in entries.entries {
            guard let m = MappingReader(entry.value, reader: entries.reader, key: entry.key, schemaPath: "credentials.*",
                                        mapPrefix: "credentials.\(entry.key).", table: ConfigKeys.main) else { continue }
            m.record(into: &config.sourceMap)
            let location = entries.reader.location(entry.keyNode)
            if config.spotify.sessions[entry.key] != nil {
                entries.reader.bag.error(location, "credential `\(entry.key)` is also a `spotify.sessions` entry, which is listed among the credentials by that name: rename one of them")
                continue
            }
            guard m.has("kind") else {
                entries.reader.bag.error(location, "credential `\(entry.key)` needs `kind`: `static` (a fixed secret) or `oauth2` (a token from a token endpoint)")
                continue
            }
            switch m.choice("kind", Kind.self) {
            case .staticValue?:
                refuseKeys(m, outside: Self.staticKeys, kind: "static")
                if let parsed = readStatic(entry.key, m, at: location) { config.credentials.statics[entry.key] = parsed }
            case .oauth2?:
                refuseKeys(m, outside: Self.oauth2Keys, kind: "oauth2")
                if let parsed = readOAuth2(entry.key, m, at: location, hasStore: hasStore) { config.credentials.oauth2[entry.key] = parsed }
            case nil:
                break
            }
        }
    }

    private func refuseKeys(_ m: MappingReader, outside allowed: Set<String>, kind: String) {
        for entry in m.entries where !allowed.contains(entry.key) {
            m.reader.bag.error(m.reader.location(entry.keyNode),
                               "`\(entry.key)` does not apply to `kind: \(kind)`; its keys are \(allowed.sorted().joined(separator: ", "))")
        }
    }

    private func readStatic(_ name: String, _ m: MappingReader, at location: SourceLocation) -> StaticCredential? {
        switch SpotifyConfigReader().secret(m, inline: "value", file: "value_file") {
        case nil:
            m.reader.bag.error(location, "credential `\(name)` (kind static) needs `value_file` (a file holding the secret) or `value: ${VARIABLE}`")
            return nil
        case .some(nil):
            return nil
        case .some(let source?):
            return StaticCredential(name: name, value: source, location: location)
        }
    }

    private func readOAuth2(_ name: String, _ m: MappingReader, at location: SourceLocation, hasStore: Bool) -> OAuth2Credential? {
        let bag = m.reader.bag
        for required in ["token_url", "grant", "client_id"] where !m.has(required) {
            bag.error(location, "credential `\(name)` (kind oauth2) needs `\(required)`")
        }
        let tokenURL = m.nonEmptyString("token_url").flatMap {
            checkedHTTPSURL($0, key: "token_url", m, why: "the token request sends the client secret, which must not travel in clear",
                            example: "https://idp.example.com/oauth/token")
        }
        let flow = m.choice("grant", SpotifySession.Flow.self)
        let clientID = m.nonEmptyString("client_id")
        let secretResult = SpotifyConfigReader().secret(m, inline: "client_secret", file: "client_secret_file")
        if flow == .clientCredentials, secretResult == nil {
            bag.error(location, "credential `\(name)` (grant client_credentials) needs `client_secret_file` or `client_secret: ${VARIABLE}`")
        }
        if flow == .refreshToken, !m.has("refresh_token_file"), !hasStore {
            bag.error(location, "credential `\(name)` (grant refresh_token) needs `refresh_token_file`, or a `spotify.store` to keep its refresh token in")
        }
        let clientAuth = m.has("client_auth") ? m.choice("client_auth", SpotifySession.ClientAuth.self) : .basic
        var extra: [SpotifySession.FormParameter] = []
        if let node = m.node("extra"),
           let map = MappingReader(node, reader: m.reader, key: "extra", schemaPath: "credentials.*.extra", mapPrefix: m.mapPrefix + "extra.", known: nil) {
            for field in map.entries {
                guard let value = m.reader.text(field.value, key: field.key, expected: "a string") else { continue }
                if ["grant_type", "client_id", "client_secret", "refresh_token"].contains(field.key) {
                    bag.error(m.reader.location(field.keyNode), "`extra` may not set `\(field.key)`: pinproxy sends it from the credential's own keys")
                    continue
                }
                extra.append(.init(name: field.key, value: value))
            }
        }
        let login = flow.map { readLogin(name, m, at: location, flow: $0) } ?? (nil, nil)
        guard let tokenURL, let flow, let clientID, let clientAuth, secretResult != .some(nil) else { return nil }
        var session = SpotifySession(name: name, flow: flow, clientID: clientID, clientSecret: secretResult ?? nil,
                                     refreshTokenFile: m.path("refresh_token_file"),
                                     refreshBefore: m.duration("refresh_before") ?? .seconds(300), location: location)
        session.tokenURL = tokenURL
        session.clientAuth = clientAuth
        session.scope = m.nonEmptyString("scope")
        session.audience = m.nonEmptyString("audience")
        session.resource = m.nonEmptyString("resource")
        session.extraParameters = extra.sorted { $0.name < $1.name }
        (session.authorizeURL, session.redirectURI) = login
        return session
    }

    /// `authorize_url` and `redirect_uri`, which `pinproxy credentials login`
    /// needs (docs/contract.md §3 Credentials): both or neither, on a
    /// `refresh_token` grant only, the first https, the second a loopback
    /// address the login can listen on.
    private func readLogin(_ name: String, _ m: MappingReader, at location: SourceLocation,
                           flow: SpotifySession.Flow) -> (String?, String?) {
        let bag = m.reader.bag
        guard m.has("authorize_url") || m.has("redirect_uri") else { return (nil, nil) }
        if flow != .refreshToken {
            for key in ["authorize_url", "redirect_uri"] where m.has(key) {
                bag.error(m.keyLocation(key), "`\(key)` applies to `grant: refresh_token` only: a \(flow.rawValue) grant needs no login")
            }
            return (nil, nil)
        }
        for (present, missing) in [("authorize_url", "redirect_uri"), ("redirect_uri", "authorize_url")] where m.has(present) && !m.has(missing) {
            bag.error(location, "credential `\(name)` has `\(present)` but no `\(missing)`: `pinproxy credentials login` needs both")
        }
        let authorize = m.nonEmptyString("authorize_url").flatMap {
            checkedHTTPSURL($0, key: "authorize_url", m, why: "the browser signs in there; over http:// a network attacker could show a forged page",
                            example: "https://idp.example.com/oauth/authorize")
        }
        var redirect = m.nonEmptyString("redirect_uri")
        if let uri = redirect, LoopbackRedirect(uri) == nil {
            bag.error(m.valueLocation("redirect_uri"),
                      "`redirect_uri` must be http:// on a loopback address, such as http://127.0.0.1:8765/callback, where `pinproxy credentials login` listens for the browser; not `\(uri)`")
            redirect = nil
        }
        return (authorize, redirect)
    }

    /// `token_url` (the token request carries the client secret and returns
    /// bearer tokens) and `authorize_url`: https only, as for `spotify.accounts`.
    private func checkedHTTPSURL(_ text: String, key: String, _ m: MappingReader, why: String, example: String) -> String? {
        let url = URL(string: text)
        switch (url?.scheme?.lowercased(), url?.host) {
        case ("https"?, _?):
            return text
        case ("http"?, _?):
            m.reader.bag.error(m.valueLocation(key),
                               "`\(key)` must be an https:// URL: \(why); write `https://\(text.dropFirst("http://".count))`")
        default:
            m.reader.bag.error(m.valueLocation(key), "`\(key)` must be an https:// URL such as \(example), not `\(text)`")
        }
        return nil
    }
}
