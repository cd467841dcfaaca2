import Foundation
import Logging
import PinproxyTLS
import ServiceLifecycle

/// Polls the main file and the policy files and reloads when their content
/// changes (DESIGN §3, §10: live within 5 s). Polling content digests rather
/// than using inotify: it works the same on every file system, including
/// Kubernetes ConfigMap mounts that swap a symlink, and an edit within the
/// same second that keeps the size still counts.
public struct PolicyFileWatcher: Service {
    public let store: PolicyStore
    public let interval: Duration
    private let logger: Logger

    public init(store: PolicyStore, interval: Duration = .seconds(1), logger: Logger = Logger(label: "pinproxy.policy.watch")) {
        self.store = store
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        var last = fingerprint()
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let current = fingerprint()
            guard current != last else { continue }
            last = current
            logger.info("policy files changed; reloading")
            store.reload(trigger: .fileChange)
            // The reload may have named other files (a new `policies` path).
            last = fingerprint()
        }
    }

    /// Path → SHA-256 of the content (nil when unreadable) for the main file,
    /// the current policies path's files, and the files the last load read.
    func fingerprint() -> [String: [UInt8]?] {
        let snapshot = store.snapshot
        var paths = Set(snapshot.files)
        if let main = store.loader.resolvedConfigFile { paths.insert(main) }
        let scratch = DiagnosticBag()
        for file in PolicyFileLoader.files(at: snapshot.config.policiesPath, location: .embeddedDefaults, into: scratch) ?? [] {
            paths.insert(file)
        }
        var result: [String: [UInt8]?] = [:]
        for path in paths {
            result[path] = FileManager.default.contents(atPath: path).map { SHA256Digest.hash([UInt8]($0)) }
        }
        return result
    }
}
