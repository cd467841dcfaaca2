import Foundation

/// A real PostgreSQL 15 (Debian's `postgresql` package) on a loopback port the
/// test chose free, in a temp directory, for tests of the session store
/// (docs/contract.md §12). `initdb` and `postgres` refuse to run as root, so they
/// run as the `postgres` user (`runuser`) in a directory chowned to it.
/// Password (SCRAM) authentication for a test role that owns one database.
/// Stopped by the postmaster's own PID; `stop()` and `start()` again keep the data.
public final class PostgresServer: @unchecked Sendable {
    public static let binaries = "/usr/lib/postgresql/15/bin"
    public let directory: TemporaryDirectory
    public let port: Int
    public let user = "pinproxy"
    public let database = "pinproxy"
    public let password: String
    private let superPassword: String
    private let lock = NSLock()
    private var child: ChildProcess?
    private var launches = 0

    /// Why this machine cannot run the fixture, or nil when it can.
    public static var unavailableReason: String? {
        if !FileManager.default.isExecutableFile(atPath: "\(binaries)/postgres") {
            return "PostgreSQL 15 is not installed (scripts/install-deps installs postgresql)"
        }
        if getuid() == 0, getpwnam("postgres") == nil { return "no postgres user to run the server as" }
        return nil
    }

    public init() throws {
        if let reason = Self.unavailableReason { throw TestSupportError(reason) }
        directory = try TemporaryDirectory("pinproxy-pg")
        port = try freePort()
        password = "pw-" + UUID().uuidString
        superPassword = "su-" + UUID().uuidString
        try directory.write("superpw", superPassword + "\n")
        if getuid() == 0, let account = getpwnam("postgres") {
            for path in [directory.path, directory.file("superpw")] where chown(path, account.pointee.pw_uid, account.pointee.pw_gid) != 0 {
                throw TestSupportError("chown \(path) to postgres: \(String(cString: strerror(errno)))")
            }
        }
        try ChildProcess.check("/usr/bin/env", asPostgres(["\(Self.binaries)/initdb", "-D", dataDirectory, "-U", "postgres",
                                                            "--auth=scram-sha-256", "--pwfile=\(directory.file("superpw"))",
                                                            "-E", "UTF8", "--no-sync"]))
        try start()
        // Two calls: `psql -c` runs one transaction, and CREATE DATABASE refuses to be in one.
        try psql(superuser: true, database: "postgres", "CREATE ROLE \(user) LOGIN PASSWORD '\(password)'")
        try psql(superuser: true, database: "postgres", "CREATE DATABASE \(database) OWNER \(user)")
    }

    deinit { stop() }

    public var dataDirectory: String { directory.file("data") }
    /// For `spotify.store.postgres`.
    public var url: String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    private func asPostgres(_ command: [String]) -> [String] {
        getuid() == 0 ? ["runuser", "-u", "postgres", "--"] + command : command
    }

    /// Starts the server (again) and waits until it accepts connections.
    public func start() throws {
        try lock.withLock {
            guard child == nil else { return }
            launches += 1
            let command = asPostgres(["\(Self.binaries)/postgres", "-D", dataDirectory, "-p", String(port),
                                      "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=\(directory.path)",
                                      "-c", "fsync=off", "-c", "max_connections=200"])
            child = try ChildProcess("/usr/bin/env", command, directory: directory, name: "postgres-\(launches)")
        }
        guard pollUntilBlocking(timeout: 30, every: 0.1, { (try? ChildProcess.run("\(Self.binaries)/pg_isready",
                                                                          ["-h", "127.0.0.1", "-p", String(port)]).status) == 0 }) else {
            throw TestSupportError("PostgreSQL did not start; log:\n\(log)")
        }
        if let pid = postmasterPID { TestCleanup.register(pid: pid) }
    }

    /// Fast shutdown (SIGINT to the postmaster): connections are closed at once.
    public func stop() {
        let running: ChildProcess? = lock.withLock {
            defer { child = nil }
            return child
        }
        guard let running else { return }
        if let pid = postmasterPID {
            kill(pid, SIGINT)
            _ = pollUntilBlocking(timeout: 30, every: 0.05) { kill(pid, 0) != 0 }
            TestCleanup.unregister(pid: pid)
        }
        running.stop()
    }

    /// The postmaster's PID, from `postmaster.pid`'s first line.
    public var postmasterPID: pid_t? {
        guard let text = try? String(contentsOfFile: "\(dataDirectory)/postmaster.pid", encoding: .utf8),
              let line = text.split(separator: "\n").first else { return nil }
        return pid_t(line)
    }

    public var log: String {
        lock.withLock { child?.outputText } ?? ""
    }

    private var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["PGCONNECT_TIMEOUT"] = "5"
        return environment
    }

    /// Runs SQL through `psql` over TCP (password authentication); returns its output.
    @discardableResult
    public func psql(superuser: Bool = false, database: String? = nil, _ sql: String) throws -> String {
        var environment = self.environment
        environment["PGPASSWORD"] = superuser ? superPassword : password
        let (status, output) = try ChildProcess.run("psql", [
            "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", String(port),
            "-U", superuser ? "postgres" : user, "-d", database ?? self.database, "-c", sql,
        ], environment: environment)
        guard status == 0 else { throw TestSupportError("psql exited \(status): \(output)") }
        return output
    }

    /// `pg_dump` of the test database, as SQL text.
    public func dump() throws -> String {
        var environment = self.environment
        environment["PGPASSWORD"] = password
        let (status, output, errors) = try ChildProcess.runSeparately("pg_dump", [
            "-h", "127.0.0.1", "-p", String(port), "-U", user, database,
        ], environment: environment)
        guard status == 0 else { throw TestSupportError("pg_dump exited \(status): \(errors)") }
        return output
    }
}
