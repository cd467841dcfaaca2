import Foundation
import PinproxyTLS

/// Reads `spotify.store` (docs/contract.md §12). The URL names host, port, role
/// and database; the password comes from `password` or `password_file`, never
/// the URL (a URL ends up in logs and process listings). The key file is read
/// here so that `check` refuses a key that is not base64 of 32 bytes.
struct SpotifyStoreReader {
    func read(_ m: MappingReader) -> SpotifyStoreConfig? {
        let bag = m.reader.bag
        if !m.has("postgres") {
            bag.error(m.location, "`spotify.store` needs `postgres` (a URL such as postgres://pinproxy@db.internal:5432/pinproxy)")
        }
        if !m.has("key_file") {
            bag.error(m.location, "`spotify.store` needs `key_file` (a file holding base64 of 32 bytes: `openssl rand -base64 32`)")
        }
        var parsed: (host: String, port: Int, user: String, database: String)?
        let url = m.nonEmptyString("postgres")
        if let url {
            switch Self.parse(url) {
            case .success(let value): parsed = value
            case .failure(let problem): bag.error(m.valueLocation("postgres"), "`postgres`: \(problem.message)")
            }
        }
        var password: SecretSource?
        if m.has("password"), m.has("password_file") {
            bag.error(m.keyLocation("password_file"), "give either `password` or `password_file`, not both")
            return nil
        } else if m.has("password") {
            guard let value = m.nonEmptyString("password") else { return nil }
            password = .inline(Secret(value))
        } else if m.has("password_file") {
            guard let path = m.path("password_file") else { return nil }
            password = .file(path)
        }
        let tls = m.has("tls") ? m.choice("tls", SpotifyStoreConfig.TLSMode.self) : .require
        var key: Secret?
        let keyFile = m.path("key_file")
        if let keyFile {
            switch Self.readKey(keyFile) {
            case .success(let value): key = value
            case .failure(let problem): bag.error(m.valueLocation("key_file"), "`key_file`: \(problem.message)")
            }
        }
        guard let url, let parsed, let tls, let keyFile, let key else { return nil }
        return SpotifyStoreConfig(url: url, host: parsed.host, port: parsed.port, user: parsed.user, database: parsed.database,
                                  password: password, tls: tls, keyFile: keyFile, key: key, location: m.location)
    }

    struct Problem: Error { var message: String }

    /// `postgres://USER@HOST[:PORT][/DATABASE]` (or `postgresql://`); the database defaults to the user's name.
    static func parse(_ text: String) -> Result<(host: String, port: Int, user: String, database: String), Problem> {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            return .failure(Problem(message: "expected a URL such as postgres://pinproxy@db.internal:5432/pinproxy, not `\(text)`"))
        }
        if components.password != nil {
            return .failure(Problem(message: "the URL carries a password: move it to `password_file` (or `password: ${VAR}`), since URLs end up in logs"))
        }
        guard let host = components.host, !host.isEmpty else {
            return .failure(Problem(message: "the URL names no host (expected postgres://USER@HOST:PORT/DATABASE)"))
        }
        guard let user = components.user, !user.isEmpty else {
            return .failure(Problem(message: "the URL names no role (expected postgres://USER@HOST:PORT/DATABASE)"))
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { return .failure(Problem(message: "port \(port) is out of range")) }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        if path.contains("/") { return .failure(Problem(message: "the URL's path must be just the database name, not `\(path)`")) }
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        return .success((bareHost, port, user, path.isEmpty ? user : path))
    }

    /// The key file: base64 of 32 bytes, trailing white space ignored (as every secret file).
    static func readKey(_ path: String) -> Result<Secret, Problem> {
        guard let data = FileBytes.read(path) else {
            return .failure(Problem(message: FileManager.default.fileExists(atPath: path)
                ? "cannot read \(path)" : "\(path) does not exist (create it with `openssl rand -base64 32 > \(path)`)"))
        }
        let text = String(decoding: data, as: UTF8.self)
        var end = text.endIndex
        while end > text.startIndex, text[text.index(before: end)].isWhitespace { end = text.index(before: end) }
        let value = String(text[..<end])
        guard let bytes = Base64.decode(value) else {
            return .failure(Problem(message: "\(path) is not base64 (expected 32 random bytes: `openssl rand -base64 32`)"))
        }
        guard bytes.count == 32 else {
            return .failure(Problem(message: "\(path) holds \(bytes.count) bytes; AES-256 needs 32 (`openssl rand -base64 32`)"))
        }
        return .success(Secret(value))
    }
}
