import Foundation

/// N `pinproxy run` replicas (the real binary) sharing one PostgreSQL session
/// store, one CA, one mock accounts service and one mock Web API
/// (docs/contract.md §12). Session `user` (flow refresh_token) serves
/// api.spotify.test; session `app` (client_credentials) serves apps.spotify.test.
public final class SessionStoreCluster: @unchecked Sendable {
    public final class Replica: @unchecked Sendable {
        public let process: ChildProcess
        public let port: Int
        public let adminPort: Int
        public var proxyURL: String { "http://127.0.0.1:\(port)" }

        init(process: ChildProcess) throws {
            self.process = process
            port = try Self.listeningPort("proxy listening", in: process)
            adminPort = try Self.listeningPort("admin API listening", in: process)
        }

        static func listeningPort(_ message: String, in process: ChildProcess) throws -> Int {
            try process.waitForOutput(timeout: 60) { output in
                guard let line = output.split(separator: "\n").first(where: { $0.contains("\"\(message)\"") }),
                      let range = line.range(of: #""address":"127.0.0.1:"#) else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }
        }

        public var log: String { process.outputText }
    }

    public let dir: TemporaryDirectory
    public let pki: TestPKI
    public let accounts: MockAccounts
    public let api: MockWebAPI
    public let postgres: PostgresServer?
    public let seedRefreshToken: String
    public private(set) var replicas: [Replica] = []

    /// - Parameters:
    ///   - refreshTokenFile: false gives session `user` no file (the store is then its only source).
    ///   - loginPort: session `user`'s `redirect_uri` port, for `pinproxy spotify login`.
    public init(replicas count: Int, store: Bool = true, refreshBefore: String = "1s", refreshTokenFile: Bool = true,
         loginPort: Int? = nil, configureAccounts: (MockAccounts) -> Void = { _ in }) async throws {
        dir = try TemporaryDirectory("pinproxy-store")
        pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.spotify.test", "apps.spotify.test"])
        accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
        configureAccounts(accounts)
        api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
        postgres = store ? try PostgresServer() : nil
        try dir.write("secret.txt", accounts.clientSecret + "\n")
        seedRefreshToken = accounts.issueRefreshToken()
        try dir.write("user.token", seedRefreshToken + "\n")
        chmod(dir.file("user.token"), 0o600)
        // `openssl rand -base64 32`, as the docs say.
        try dir.write("store.key", try ChildProcess.check("openssl", ["rand", "-base64", "32"]))
        if let postgres { try dir.write("pg.password", postgres.password + "\n") }
        let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
        let pins = Scenario.pins(intermediate, Scenario.backupPin)
        try dir.write("etc/policies/test.yaml", Scenario.policies([
            .intercept("accounts.spotify.test", upstream: .port(accounts.port), pins),
            .intercept("api.spotify.test", upstream: .port(api.port), pins, "auth: { spotify: user }"),
            .intercept("apps.spotify.test", upstream: .port(api.port), pins, "auth: { spotify: app }"),
        ], caFile: pki.rootCertificate))
        let storeSection = postgres.map { postgres in
            """
              store:
                postgres: \(postgres.url)
                password_file: ../pg.password
                tls: disable
                key_file: ../store.key

            """
        } ?? ""
        try dir.write("etc/pinproxy.yaml", """
            \(ProxyHarness.baseMainConfig)
            network:
              allow: [127.0.0.0/8]
            spotify:
              accounts: https://accounts.spotify.test
              token_timeout: 3s
            \(storeSection)  sessions:
                user:
                  flow: refresh_token
                  client_id: \(accounts.clientID)
                  client_secret_file: ../secret.txt
            \(refreshTokenFile ? "      refresh_token_file: ../user.token\n" : "")\(loginPort.map { "      redirect_uri: http://127.0.0.1:\($0)/callback\n" } ?? "")      refresh_before: \(refreshBefore)
                app:
                  flow: client_credentials
                  client_id: \(accounts.clientID)
                  client_secret_file: ../secret.txt
                  refresh_before: \(refreshBefore)
            """)
        // One CA for all replicas, made before any starts.
        try ChildProcess.check(PinproxyBinary.path, ["ca", "init", "--config", dir.file("etc/pinproxy.yaml")])
        try start(count)
    }

    /// Starts `count` more replicas at once, then waits for each to listen.
    public func start(_ count: Int) throws {
        let first = replicas.count
        let processes = try (first..<first + count).map { index in
            try ChildProcess(PinproxyBinary.path, ["run", "--config", dir.file("etc/pinproxy.yaml")], directory: dir,
                             name: "replica-\(index)", currentDirectory: dir.path)
        }
        replicas += try processes.map(Replica.init(process:))
    }

    deinit {
        replicas.forEach { $0.process.stop() }
    }

    public var caFile: String { dir.file("state/ca.pem") }

    /// One request through replica `index` to a host whose policy attaches a session's token.
    public func get(_ index: Int, host: String = "api.spotify.test", path: String = "/v1/me") throws -> CurlResult {
        try Curl.run("https://\(host)\(path)", proxyURL: replicas[index].proxyURL, caFile: caFile, directory: dir)
    }

    public func admin(_ index: Int, _ path: String) throws -> CurlResult {
        try Curl.run("http://127.0.0.1:\(replicas[index].adminPort)\(path)", proxyURL: nil, caFile: nil, directory: dir)
    }

    public func storeUp(_ index: Int) throws -> Double? {
        try PrometheusText(parsing: try admin(index, "/metrics").body).value("pinproxy_store_up")
    }

    /// The store's generation of `session` (each is one token call that was stored).
    public func storedGeneration(_ session: String) throws -> Int? {
        guard let postgres else { return nil }
        return Int(try postgres.psql("SELECT generation FROM pinproxy_spotify_sessions WHERE session = '\(session)'")
            .trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Token requests of one grant type so far.
    public func calls(_ grantType: String) -> Int {
        accounts.counters.byGrantType[grantType] ?? 0
    }
}
