import Foundation
import Logging
import NIOConcurrencyHelpers

/// Why a reload happened, for the log and the admin API.
public enum ReloadTrigger: String, Sendable, Hashable {
    case signal = "sighup"
    case admin = "admin_api"
    case fileChange = "file_change"
    case manual
}

/// One reload attempt.
public enum ReloadOutcome: Sendable {
    /// The new snapshot serves from now on; its warnings.
    case success(PolicySnapshot, warnings: [Diagnostic])
    /// The old snapshot keeps serving; every error found.
    case failure(errors: [Diagnostic])

    /// `policy_reloads_total{result=…}`.
    public var metricLabel: String {
        switch self {
        case .success: return "success"
        case .failure: return "failure"
        }
    }
}

/// The last reload, for `GET /policies` and `POST /reload`.
public struct ReloadInfo: Sendable {
    public enum Result: String, Sendable { case success, failure }
    public var at: Date
    public var trigger: ReloadTrigger
    public var result: Result
    /// Empty on success.
    public var errors: [Diagnostic]
}

/// What observers hear after every reload attempt: enough for a metrics
/// layer to count it and for the server to retire pooled connections whose
/// policy digest changed.
public struct ReloadEvent: Sendable {
    public var info: ReloadInfo
    public var outcome: ReloadOutcome
    public var previous: PolicySnapshot
    /// The snapshot serving after the attempt (== previous on failure).
    public var current: PolicySnapshot
}

/// Holds the serving snapshot. Reads are one lock-protected reference copy,
/// cheap enough for every new connection on every event loop; reloads are
/// serialized on a second lock, so SIGHUP, `POST /reload` and the watcher
/// never interleave, and a read never waits for a reload's file I/O.
public final class PolicyStore: Sendable {
    private struct State {
        var snapshot: PolicySnapshot
        var lastReload: ReloadInfo?
        var observers: [@Sendable (ReloadEvent) -> Void]
    }

    public let loader: PolicyLoader
    private let state: NIOLockedValueBox<State>
    private let reloadLock = NIOLock()
    private let logger: Logger

    /// Starts with a snapshot already loaded (the first load's failure is the
    /// caller's to report: at start there is nothing old to keep serving).
    public init(loader: PolicyLoader, initial: PolicySnapshot, logger: Logger = Logger(label: "pinproxy.policy")) {
        self.loader = loader
        self.logger = logger
        self.state = NIOLockedValueBox(State(snapshot: initial, lastReload: nil, observers: []))
    }

    /// Loads once and starts serving it; the result's diagnostics if it cannot.
    public static func load(_ loader: PolicyLoader, logger: Logger = Logger(label: "pinproxy.policy")) -> Result<PolicyStore, PolicyLoadFailure> {
        let result = loader.load()
        guard let snapshot = result.snapshot else { return .failure(PolicyLoadFailure(diagnostics: result.diagnostics)) }
        for warning in result.warnings {
            logger.warning("\(warning.message)", metadata: warning.logMetadata)
        }
        return .success(PolicyStore(loader: loader, initial: snapshot, logger: logger))
    }

    /// The snapshot to use for a new connection.
    public var snapshot: PolicySnapshot { state.withLockedValue { $0.snapshot } }

    public var lastReload: ReloadInfo? { state.withLockedValue { $0.lastReload } }

    /// Called after every reload attempt, on the reloading thread, outside the
    /// store's locks. Keep it short (count, schedule work).
    public func addObserver(_ observer: @escaping @Sendable (ReloadEvent) -> Void) {
        state.withLockedValue { $0.observers.append(observer) }
    }

    /// Loads and validates everything again; swaps the snapshot only when the
    /// whole new set is valid. Blocking (file I/O, TLS contexts): call it off
    /// the event loops.
    @discardableResult
    public func reload(trigger: ReloadTrigger = .manual) -> ReloadOutcome {
        reloadLock.withLock {
            let result = loader.load()
            let now = loader.clock()
            let outcome: ReloadOutcome
            if let snapshot = result.snapshot {
                outcome = .success(snapshot, warnings: result.warnings)
                logger.info("policy reloaded", metadata: [
                    "trigger": "\(trigger.rawValue)", "hosts": "\(snapshot.policies.count)", "warnings": "\(result.warnings.count)",
                ])
                for warning in result.warnings {
                    logger.warning("\(warning.message)", metadata: warning.logMetadata)
                }
            } else {
                outcome = .failure(errors: result.errors)
                let files = Array(Set(result.errors.map(\.file))).sorted()
                logger.error("policy reload failed; the previous policy keeps serving", metadata: [
                    "trigger": "\(trigger.rawValue)", "errors": .stringConvertible(result.errors.count),
                    "files": .array(files.map { .string($0) }),
                ])
                for error in result.errors {
                    logger.error("\(error.message)", metadata: error.logMetadata)
                }
            }
            let info = ReloadInfo(at: now, trigger: trigger, result: result.snapshot == nil ? .failure : .success, errors: result.errors)
            let (previous, current, observers) = state.withLockedValue { state in
                let previous = state.snapshot
                if let snapshot = result.snapshot { state.snapshot = snapshot }
                state.lastReload = info
                return (previous, state.snapshot, state.observers)
            }
            let event = ReloadEvent(info: info, outcome: outcome, previous: previous, current: current)
            for observer in observers { observer(event) }
            return outcome
        }
    }
}

/// The first load failed: there is no snapshot to serve.
public struct PolicyLoadFailure: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [Diagnostic]
    public var description: String { diagnostics.errors.map(\.description).joined(separator: "\n") }
}
