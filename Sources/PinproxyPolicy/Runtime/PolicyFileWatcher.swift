import Foundation
import Logging
import PinproxyTLS
import ServiceLifecycle

/// Polls the main file and the policy files and reloads when their content
/// changes and has settled (live within 5 s: two polls and a reload).
/// Polling rather than inotify: it works the same on every file system,
/// including Kubernetes ConfigMap mounts that swap a symlink. A file still
/// being written is not read for a reload until two successive polls see it
/// unchanged (`SettledChange`).
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
        var change = SettledChange(applied: fingerprint())
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            poll(&change)
        }
    }

    /// One poll: what `run` does every `interval`. A function of its own so a
    /// test steps the watcher poll by poll instead of sleeping through intervals.
    @discardableResult
    func poll(_ change: inout SettledChange) -> SettledChange.Decision {
        let current = fingerprint()
        let decision = change.poll(current)
        switch decision {
        case .unchanged:
            break
        case .settling:
            logger.debug("policy files changed; waiting for them to settle")
        case .reload:
            logger.info("policy files changed; reloading")
            store.reload(trigger: .fileChange)
            // The reload may have named other files (a new `policies` path).
            change.reloaded(current, after: fingerprint())
        }
        return decision
    }

    /// Every watched path and its state: the main file, the current
    /// policies path's files, and the files the last load read.
    func fingerprint() -> SettledChange.Files {
        let snapshot = store.snapshot
        var paths = Set(snapshot.files)
        if let main = store.loader.resolvedConfigFile { paths.insert(main) }
        let scratch = DiagnosticBag()
        for file in PolicyFileLoader.files(at: snapshot.config.policiesPath, location: .embeddedDefaults, into: scratch) ?? [] {
            paths.insert(file)
        }
        var result: SettledChange.Files = [:]
        for path in paths {
            result.updateValue(WatchedFile.read(path), forKey: path)
        }
        return result
    }
}
