import Foundation
import Logging
import NIOPosix
import PinproxyAdmin
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTestSupport
import ServiceLifecycle
import Testing

/// A config tree in a temp dir, loaded with a fixed clock.
final class AdminFixture {
    /// "Today": 2026-11-22T12:00:00Z.
    static let now = DateText.parse("2026-11-22T12:00:00Z", bound: .start)!

    let directory: TemporaryDirectory

    /// `main`: the lines of pinproxy.yaml after `policies:` (credentials, say).
    init(policies: String, main: String = "") throws {
        directory = try TemporaryDirectory("pinproxy-admin")
        try directory.write("pinproxy.yaml", "policies: policies\n" + main)
        try directory.write("policies/p.yaml", policies)
    }

    var policyFile: String { directory.file("policies/p.yaml") }

    func write(policies: String) throws {
        try directory.write("policies/p.yaml", policies)
    }

    func store() throws -> PolicyStore {
        let loader = PolicyLoader(
            configFile: directory.file("pinproxy.yaml"), environment: [:],
            workingDirectory: directory.path, clock: { AdminFixture.now })
        return try PolicyStore.load(loader, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })).get()
    }

    static func pin(_ seed: UInt8) -> String {
        Data(repeating: seed, count: 32).base64EncodedString()
    }
}

/// Runs an admin server on 127.0.0.1:0 in a service group for the duration of `body`.
func withAdminServer<T>(
    store: PolicyStore, metrics: PinproxyMetrics = PinproxyMetrics(), providers: AdminServer.Providers,
    limits: AdminLimits = AdminLimits(),
    _ body: (AdminClient) async throws -> T
) async throws -> T {
    // A loop of the server's own, not NIO's singleton group: the suites
    // beside it in a parallel run share the singleton's loops, and the
    // limit tests' idle and accept timers must not wait behind their work.
    let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let server = AdminServer(
        listen: HostPort(host: "127.0.0.1", port: 0), store: store, metrics: metrics, providers: providers, limits: limits,
        eventLoopGroup: loops, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    let group = ServiceGroup(services: [server], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
    let running = Task { try await group.run() }
    do {
        let address = try await server.boundAddress
        let result = try await body(AdminClient(base: "http://\(address)"))
        await group.triggerGracefulShutdown()
        try await running.value
        try await loops.shutdownGracefully()
        return result
    } catch {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        try? await loops.shutdownGracefully()
        throw error
    }
}

/// One HTTP exchange through curl: the real client operators use.
struct AdminResponse: Sendable {
    var status: Int
    /// Lower-cased names.
    var headers: [String: String]
    var body: String

    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(body.utf8))
        return try #require(object as? [String: Any], "not a JSON object: \(body)")
    }
}

/// Runs curl on a thread of its own. Not the cooperative pool (two threads on a
/// two-core machine): a blocking wait there would starve the server under test.
/// Not NIO's thread pool either: `POST /reload` runs there, so curls waiting
/// for reloads from tests running side by side could hold every one of its
/// threads and wait for a reload that cannot start.
struct AdminClient: Sendable {
    var base: String

    /// The admin listener's port, for raw sockets.
    var port: Int { Int(base.split(separator: ":").last!)! }

    func request(_ method: String, _ path: String) async throws -> AdminResponse {
        let base = self.base
        return try await onOwnThread { try Self.exchange(base, method, path) }
    }

    private static func exchange(_ base: String, _ method: String, _ path: String) throws -> AdminResponse {
        let (status, output) = try ChildProcess.run("curl", ["-sS", "-i", "--max-time", "10", "-X", method, base + path])
        guard status == 0 else { throw TestSupportError("curl \(method) \(path) exited \(status): \(output)") }
        guard let split = output.range(of: "\r\n\r\n") else { throw TestSupportError("no header end: \(output)") }
        let head = output[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusLine = head[0].split(separator: " ")
        guard statusLine.count >= 2, let code = Int(statusLine[1]) else { throw TestSupportError("bad status line: \(head[0])") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return AdminResponse(status: code, headers: headers, body: String(output[split.upperBound...]))
    }

    func get(_ path: String) async throws -> AdminResponse { try await request("GET", path) }
    func post(_ path: String) async throws -> AdminResponse { try await request("POST", path) }
}
