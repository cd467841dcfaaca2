import Foundation
import Logging
import PinproxyPolicy
import PinproxySessionStore
import PinproxySpotify
import PinproxyTLS
import PinproxyTestSupport

// bench/store.sh: the session store of docs/contract.md §12, counted. Two
// measurements, each printed as Markdown table rows on standard output:
//
//   pinproxy-storebench calls [--intervals K]   token calls per refresh interval,
//                                               1, 3 and 10 replicas, without and with the store
//   pinproxy-storebench latency                 a token read from the store beside one from memory
//
// Figures, not tests: they assert nothing, so they live here and not in a test
// target. Everything they start (PostgreSQL, replicas, mocks) they stop by PID.

/// Token lifetime 4 s, refresh_before 1 s: every session is refreshed every 3 s
/// (the same 55-of-60 shape as Spotify's 1 h tokens with the default 5m, scaled down).
let lifetime = 4
let interval: TimeInterval = 3

func tokenCalls(replicas: Int, intervals: Int) async throws -> [String] {
    var lines: [String] = []
    for store in [false, true] {
        let cluster = try await SessionStoreCluster(replicas: replicas, store: store) {
            $0.update { $0.rotateRefreshTokens = true; $0.expiresIn = lifetime }
        }
        // Warm-up: every replica has served both sessions once.
        for index in 0..<replicas {
            _ = try cluster.get(index)
            _ = try cluster.get(index, host: "apps.spotify.test")
        }
        let before = cluster.accounts.counters
        let started = Date()
        var requests = 0
        var failed = 0
        // Steady requests: round-robin over replicas and both sessions, for K intervals.
        while Date().timeIntervalSince(started) < interval * Double(intervals) {
            for index in 0..<replicas {
                for host in ["api.spotify.test", "apps.spotify.test"] {
                    requests += 1
                    if try cluster.get(index, host: host).status != 200 { failed += 1 }
                }
            }
        }
        let elapsed = Date().timeIntervalSince(started)
        let after = cluster.accounts.counters
        let measured = elapsed / interval
        func perInterval(_ grant: String) -> String {
            let calls = (after.byGrantType[grant] ?? 0) - (before.byGrantType[grant] ?? 0)
            return "\(calls) (\(String(format: "%.2f", Double(calls) / measured)))"
        }
        let superseded = after.supersededRefreshTokens - before.supersededRefreshTokens
        lines.append("| \(replicas) | \(store ? "yes" : "no") | \(String(format: "%.1f", elapsed)) s = \(String(format: "%.2f", measured)) | "
            + "\(perInterval("client_credentials")) | \(perInterval("refresh_token")) | \(superseded) | \(failed) of \(requests) |")
    }
    return lines
}

struct NoEndpoint: TokenEndpoint {
    struct Called: Error {}
    func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse {
        throw Called()
    }
}

func readLatency() async throws -> [String] {
    let postgres = try PostgresServer()
    let logger = Logger(label: "bench")
    let key = Secret(Base64.encode((0..<32).map { _ in UInt8.random(in: 0...255) }))
    let config = SpotifyStoreConfig(url: postgres.url, host: "127.0.0.1", port: postgres.port, user: postgres.user, database: postgres.database,
                                    password: .inline(Secret(postgres.password)), tls: .disable, keyFile: "(bench)", key: key)
    let store = try PostgresSessionStore(config: config, logger: logger)
    let task = Task { try await store.run() }
    defer { task.cancel() }
    // PostgreSQL is an external process: a bounded wait for the store to connect.
    let deadline = Date().addingTimeInterval(30)
    while !store.isUp, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
    let now = Date()
    try await store.withLockedSession(session: "app") { _ -> (write: StoredSession?, result: Void) in
        (StoredSession(generation: 1, accessToken: Secret("stored-access"), accessObtainedAt: now,
                       accessExpiresAt: now.addingTimeInterval(3600)), ())
    }
    let session = SpotifySession(name: "app", flow: .clientCredentials, clientID: "id", clientSecret: .inline(Secret("s")),
                                 refreshTokenFile: nil)
    let clock = ContinuousClock()
    var fromStore: [Duration] = []
    var fromMemory: [Duration] = []
    for _ in 0..<200 {
        // A session with nothing cached: its first request reads the store (and finds a valid token).
        let tokens = TokenSession(config: session, endpoint: NoEndpoint(), logger: logger, shared: store)
        fromStore.append(try await clock.measure { _ = try await tokens.token(timeout: .seconds(10)) })
        fromMemory.append(try await clock.measure { _ = try await tokens.token(timeout: .seconds(10)) })
    }
    func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
    func p90(_ values: [Duration]) -> Duration { values.sorted()[values.count * 9 / 10] }
    func ms(_ d: Duration) -> String {
        String(format: "%.3f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1000)
    }
    return [
        "| token from memory | \(ms(median(fromMemory))) | \(ms(p90(fromMemory))) |",
        "| token read from the store | \(ms(median(fromStore))) | \(ms(p90(fromStore))) |",
        "| added by the store read (median difference) | \(ms(median(fromStore) - median(fromMemory))) | |",
    ]
}

let arguments = Array(CommandLine.arguments.dropFirst())
if let reason = PostgresServer.unavailableReason {
    FileHandle.standardError.write(Data("pinproxy-storebench: \(reason) (scripts/install-deps installs PostgreSQL)\n".utf8))
    exit(2)
}
switch arguments.first {
case "calls":
    var intervals = 6
    if let flag = arguments.firstIndex(of: "--intervals"), flag + 1 < arguments.count, let k = Int(arguments[flag + 1]) { intervals = k }
    for replicas in [1, 3, 10] {
        for line in try await tokenCalls(replicas: replicas, intervals: intervals) { print(line) }
    }
case "latency":
    for line in try await readLatency() { print(line) }
default:
    FileHandle.standardError.write(Data("usage: pinproxy-storebench calls [--intervals K] | latency\n".utf8))
    exit(64)
}
