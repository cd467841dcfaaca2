import Foundation
import PinproxyPolicy
import Testing

/// `spotify.store` (docs/contract.md §12): read with `${VAR}`, checked by `check`
/// with FILE:LINE:COL errors that name the key and the fix.
struct SessionStoreConfigTests {
    static let key32 = Data((0..<32).map { UInt8($0) }).base64EncodedString()

    func tree(_ store: String, sessions: String = "", key: String? = key32) throws -> ConfigTree {
        let tree = try ConfigTree(main: """
            policies: policies
            spotify:
              store:
            \(store)
            \(sessions)
            """)
        if let key { try tree.write("store.key", key + "\n\n") }
        try tree.write("pg.password", "s3cret-pg\n")
        return tree
    }

    static let userSession = """
          sessions:
            user:
              flow: refresh_token
              client_id: abc
        """

    @Test func aCompleteStoreIsReadAndARefreshTokenSessionNeedsNoFile() throws {
        let tree = try tree("""
                postgres: postgres://pinproxy@${PGHOST}:6543/tokens
                password_file: pg.password
                key_file: store.key
            """, sessions: Self.userSession)
        let result = tree.loader(environment: ["PGHOST": "db.internal"]).load()
        #expect(result.errors.isEmpty, "\(tree.rendered(result.errors))")
        let store = try #require(result.snapshot?.config.spotify.store)
        #expect(store.host == "db.internal")
        #expect(store.port == 6543)
        #expect(store.user == "pinproxy")
        #expect(store.database == "tokens")
        #expect(store.tls == .require, "TLS is required unless the file says otherwise")
        #expect(store.password == .file(tree.root + "/pg.password"))
        #expect(store.key.reveal() == Self.key32, "trailing white space ignored")
        #expect(result.snapshot?.config.spotify.sessions["user"]?.refreshTokenFile == nil)
    }

    @Test func theDatabaseDefaultsToTheRoleAndThePortTo5432() throws {
        let tree = try tree("""
                postgres: postgresql://proxy@10.0.0.5
                password: ${PGPASS}
                tls: disable
                key_file: store.key
            """)
        let result = tree.loader(environment: ["PGPASS": "x"]).load()
        let store = try #require(result.snapshot?.config.spotify.store, "\(tree.rendered(result.errors))")
        #expect(store.database == "proxy")
        #expect(store.port == 5432)
        #expect(store.tls == .disable)
        #expect(store.password == .inline(Secret("x")))
    }

    static let broken: [(String, String, String?, [String])] = [
        ("missing postgres and key_file", "    tls: require", key32,
         ["pinproxy.yaml:4:5: error: `spotify.store` needs `postgres` (a URL such as postgres://pinproxy@db.internal:5432/pinproxy)",
          "pinproxy.yaml:4:5: error: `spotify.store` needs `key_file` (a file holding base64 of 32 bytes: `openssl rand -base64 32`)"]),
        ("password in the URL", "    postgres: postgres://u:pw@db/x\n    key_file: store.key", key32,
         ["pinproxy.yaml:4:15: error: `postgres`: the URL carries a password: move it to `password_file` (or `password: ${VAR}`), since URLs end up in logs"]),
        ("not a postgres URL", "    postgres: mysql://u@db/x\n    key_file: store.key", key32,
         ["pinproxy.yaml:4:15: error: `postgres`: expected a URL such as postgres://pinproxy@db.internal:5432/pinproxy, not `mysql://u@db/x`"]),
        ("no role", "    postgres: postgres://db/x\n    key_file: store.key", key32,
         ["pinproxy.yaml:4:15: error: `postgres`: the URL names no role (expected postgres://USER@HOST:PORT/DATABASE)"]),
        ("short key", "    postgres: postgres://u@db/x\n    key_file: store.key", Data(repeating: 1, count: 16).base64EncodedString(),
         ["pinproxy.yaml:5:15: error: `key_file`: STORE holds 16 bytes; AES-256 needs 32 (`openssl rand -base64 32`)"]),
        ("missing key file", "    postgres: postgres://u@db/x\n    key_file: store.key", nil,
         ["pinproxy.yaml:5:15: error: `key_file`: STORE does not exist (create it with `openssl rand -base64 32 > STORE`)"]),
        ("both passwords", "    postgres: postgres://u@db/x\n    password: a\n    password_file: pg.password\n    key_file: store.key", key32,
         ["pinproxy.yaml:6:5: error: give either `password` or `password_file`, not both"]),
        ("bad tls", "    postgres: postgres://u@db/x\n    tls: verify-full\n    key_file: store.key", key32,
         ["pinproxy.yaml:5:10: error: `tls` must be one of `disable`, `prefer`, `require`, not `verify-full`"]),
        ("unknown key", "    postgres: postgres://u@db/x\n    pasword: abc\n    key_file: store.key", key32,
         ["pinproxy.yaml:5:5: error: unknown key `pasword` in `spotify.store`; did you mean `password`?"]),
    ]

    @Test(arguments: broken.indices)
    func aBrokenStoreIsNamedAtItsKey(_ index: Int) throws {
        let (name, store, key, expected) = Self.broken[index]
        let tree = try tree(store, key: key)
        let result = tree.loader().load()
        let rendered = tree.rendered(result.errors).map { $0.replacingOccurrences(of: "store.key", with: "STORE") }
        #expect(rendered == expected, "\(name)")
        #expect(result.snapshot == nil)
    }

    @Test func withoutAStoreARefreshTokenSessionStillNeedsItsFile() throws {
        let tree = try ConfigTree(main: "policies: policies\nspotify:\n" + Self.userSession + "\n")
        let result = tree.loader().load()
        #expect(tree.rendered(result.errors) == [
            "pinproxy.yaml:4:5: error: Spotify session `user` (flow refresh_token) needs `refresh_token_file`, or a `spotify.store` to keep its refresh token in",
        ])
    }
}
