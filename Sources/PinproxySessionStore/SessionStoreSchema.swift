import Logging
import PostgresNIO

/// The one table of the session store (docs/contract.md §12), created the first
/// time a replica reaches the database. `CREATE TABLE IF NOT EXISTS` alone is
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

    /// True when this call created the table, false when it was there already.
    static func ensure(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(advisoryLockKey))", logger: logger)
            let rows = try await connection.query("SELECT to_regclass(\(table))::text", logger: logger)
            var exists = false
            for try await name in rows.decode(String?.self) where name != nil { exists = true }
            if exists { return false }
            try await connection.query(createStatement, logger: logger)
            return true
        }
    }
}
