/// Every key the loaders know, per object path. One table serves three
/// purposes: unknown-key detection (with "did you mean"), the JSON Schemas'
/// test (their property names must equal these sets), and documentation.
///
/// Paths: `""` is the document root, `.` separates nested objects, `[]`
/// marks list items, `*` a map of user-chosen names (`spotify.sessions.*`).
public enum ConfigKeys {
    /// The main file (`etc/pinproxy.yaml`).
    public static let main: [String: [String]] = [
        "": ["listen", "admin", "ca", "policies", "default_action", "concurrency", "clients", "network", "limits", "spotify", "log", "http2",
             "credentials", "transparent"],
        "admin": ["listen", "hosts"],
        "transparent": ["listen"],
        "ca": ["cert", "key", "chain"],
        "clients": ["allow", "identities", "require_identity"],
        "clients.identities.*": ["password_hash", "password_hash_file", "from"],
        "network": ["deny_private", "allow"],
        "limits": ["max_client_connections", "header_timeout", "idle_timeout", "max_header_bytes", "shutdown_grace"],
        "spotify": ["accounts", "token_timeout", "sessions", "swap", "store"],
        "spotify.sessions.*": [
            "flow", "client_id", "client_secret", "client_secret_file", "refresh_token_file", "refresh_before",
            "redirect_uri",
        ],
        "spotify.swap": ["listen", "session", "redirect_uri", "key_file", "key", "legacy_secret_file"],
        "spotify.store": ["postgres", "password_file", "password", "tls", "key_file"],
        "log": ["level", "format"],
        // One table for both kinds; `CredentialsConfigReader` refuses the keys the entry's `kind` does not take.
        "credentials.*": [
            "kind", "value", "value_file", "token_url", "grant", "client_id", "client_secret", "client_secret_file",
            "client_auth", "scope", "audience", "resource", "extra", "refresh_token_file", "refresh_before",
            "authorize_url", "redirect_uri",
        ],
    ]

    /// A policy file (`etc/policies/*.yaml`).
    public static let policy: [String: [String]] = [
        "": ["hosts"],
        "hosts[]": [
            "match", "action", "upstream", "upgrade_to_tls", "tls", "pins", "auth", "headers",
            "connect_timeout", "handshake_timeout", "response_timeout", "retries",
            "max_upstream_connections", "queue_timeout", "probe_interval", "clients", "upstream_proxy", "upstream_protocol",
            "websocket", "ports", "rate_limit",
        ],
        "hosts[].rate_limit": ["requests_per_second", "burst", "per"],
        "hosts[].tls": [
            "min_version", "allow_legacy_tls", "max_version", "ciphers", "ciphersuites", "ca_file",
            "client_cert", "client_key",
        ],
        "hosts[].pins": ["mode", "spki_sha256", "cert_sha256", "transition", "on_expiry"],
        "hosts[].pins.spki_sha256[]": ["pin", "not_before", "not_after", "note"],
        "hosts[].pins.cert_sha256[]": ["pin", "not_before", "not_after", "note"],
        "hosts[].pins.transition": ["from", "until"],
        "hosts[].auth": [
            "spotify", "credential", "header", "format", "by_client", "default", "require", "replace_client_auth",
            "attach_unpinned", "throttle_queue",
        ],
        "hosts[].headers": ["set", "remove"],
    ]
}

/// "Did you mean" for unknown keys: the known key at the smallest edit distance.
enum KeySuggestion {
    /// The nearest known key, if it is near enough to be a plausible typo.
    static func nearest(to key: String, in known: [String]) -> String? {
        let scored = known.map { ($0, distance(key.lowercased(), $0)) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        let threshold = max(2, key.count / 2)
        return best.1 <= threshold ? best.0 : nil
    }

    /// Levenshtein distance over Unicode scalars.
    static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a.unicodeScalars)
        let y = Array(b.unicodeScalars)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }
}
