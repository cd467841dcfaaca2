import Logging
import PostgresNIO

/// The tables of the session store (docs/contract.md §12): the sessions, and
/// the upstreams' 429 windows the replicas share. Each is created the first
/// time a replica reaches the database (a store made by an older pinproxy
/// gets the windows' table then). `CREATE TABLE IF NOT EXISTS` alone is
/// not safe when several replicas start at once (two can race on the row type
/// in `pg_type` and one fails with a unique violation), so creation runs under a
/// transaction-level advisory lock: one replica creates, the others find it.
enum SessionStoreSchema {
    static let table = "pinproxy_spotify_sessions"
    /// Any constant the database's other users do not take: "pinproxy" in ASCII, as an int8.
    static let advisoryLockKey: Int64 = 0x70696E70726F7879

    /// Tokens are `bytea` holding `SessionTokenCipher`'s sealed form, never text.
    static let createStatement: PostgresQuery = """
        CREATE TABLE IF NOT EXISTS pinproxy_spotify_sessions (
            session text PRIMARY KEY,
            generation bigint NOT NULL DEFAULT 0,
            access_token bytea,
            access_obtained_at timestamptz,
            access_expires_at timestamptz,
            refresh_token bytea,
            refresh_token_issued_at timestamptz,
            stale_generation bigint NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now()
        )
        """

    /// One row per (credential, host) whose upstream answered 429: until when
    /// it holds requests back. Rows long past are deleted as new ones come.
    static let throttleTable = "pinproxy_throttle_windows"
    static let createThrottleStatement: PostgresQuery = """
        CREATE TABLE IF NOT EXISTS pinproxy_throttle_windows (
            credential text NOT NULL,
            host text NOT NULL,
            until timestamptz NOT NULL,
            PRIMARY KEY (credential, host)
        )
        """

    /// True when this call created a table (the sessions' at a first start,
    /// or the windows' in a store an older pinproxy made), false when both were there.
    static func ensure(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(advisoryLockKey))", logger: logger)
            var created = false
            for (name, statement) in [(table, createStatement), (throttleTable, createThrottleStatement)] {
                let rows = try await connection.query("SELECT to_regclass(\(name))::text", logger: logger)
                var exists = false
                for try await found in rows.decode(String?.self) where found != nil { exists = true }
                if exists { continue }
                try await connection.query(statement, logger: logger)
                created = true
            }
            return created
        }
    }
}
