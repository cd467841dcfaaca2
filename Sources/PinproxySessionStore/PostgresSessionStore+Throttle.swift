import Foundation
import Logging
import PinproxyPolicy
import PostgresNIO

/// Upstream 429 windows shared across replicas (docs/contract.md §4
/// `upstream_throttled`, §12): a replica whose upstream answered 429 writes
/// the window into `pinproxy_throttle_windows` and notifies; every replica
/// listens, and at each notification (and each time it connects) reads the
/// windows still open. A notification carries nothing: the table is the
/// truth, so one missed while a replica was disconnected costs nothing.
extension PostgresSessionStore {
    static let throttleChannel = "pinproxy_throttle"

    /// Writes `window` (keeping a later end already there) and wakes the
    /// other replicas. A store that cannot be reached only costs the sharing:
    /// this replica holds back anyway.
    public func publish(_ window: ThrottleWindow) async {
        do {
            try await withLease { connection in
                try await self.ensureSchema(on: connection)
                try await connection.query("""
                    INSERT INTO pinproxy_throttle_windows (credential, host, until)
                    VALUES (\(window.credential), \(window.host), \(window.until))
                    ON CONFLICT (credential, host) DO UPDATE SET until = GREATEST(pinproxy_throttle_windows.until, EXCLUDED.until)
                    """, logger: self.logger)
                try await connection.query("DELETE FROM pinproxy_throttle_windows WHERE until < now() - interval '1 hour'", logger: self.logger)
                try await connection.query("SELECT pg_notify(\(Self.throttleChannel), '')", logger: self.logger)
            }
        } catch {
            logger.warning("cannot share an upstream's 429 window through the session store: other replicas keep sending until it passes", metadata: [
                "credential": "\(window.credential)", "host": "\(window.host)", "error": "\(Self.shortReason("\(error)"))",
            ])
        }
    }

    /// Hands the windows other replicas open to `adopt`, while `run` runs.
    /// Set before `run`; without it no connection is held for listening.
    public func followThrottleWindows(with adopt: @escaping @Sendable ([ThrottleWindow]) -> Void) {
        throttleSink.withLockedValue { $0 = adopt }
    }

    /// Holds one pooled connection listening; reconnects after a second when it is lost.
    func followThrottleWindows(_ adopt: @escaping @Sendable ([ThrottleWindow]) -> Void) async {
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await self.ensureSchema(on: connection)
                    try await connection.listen(on: Self.throttleChannel) { notifications in
                        // Listening first, then reading: a window written in between is seen either way.
                        adopt(try await self.openWindows(on: connection))
                        for try await _ in notifications {
                            adopt(try await self.openWindows(on: connection))
                        }
                    }
                }
            } catch {
                if !Task.isCancelled {
                    logger.debug("lost the session store's 429 windows; listening again", metadata: ["error": "\(Self.shortReason("\(error)"))"])
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func openWindows(on connection: PostgresConnection) async throws -> [ThrottleWindow] {
        let rows = try await connection.query(
            "SELECT credential, host, until FROM pinproxy_throttle_windows WHERE until > now()", logger: logger)
        var windows: [ThrottleWindow] = []
        for try await (credential, host, until) in rows.decode((String, String, Date).self) {
            windows.append(ThrottleWindow(credential: credential, host: host, until: until))
        }
        return windows
    }
}
