import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads on SIGHUP, the operator's habit from every Unix daemon. A small
/// service of its own in the process's `ServiceGroup`, ending on graceful shutdown.
public struct PolicyReloadSignalService: Service {
    public let store: PolicyStore
    private let logger: Logger

    public init(store: PolicyStore, logger: Logger = Logger(label: "pinproxy.policy.signal")) {
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            logger.info("SIGHUP received; reloading policy")
            store.reload(trigger: .signal)
        }
    }
}
