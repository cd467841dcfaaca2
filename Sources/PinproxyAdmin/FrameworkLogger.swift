import Logging
import ServiceLifecycle

extension Service {
    /// The logger handed to Hummingbird: ours, but quiet below `notice`, since
    /// its info lines ("Server started and listening on …") repeat the one
    /// pinproxy writes with the bound address, and its warnings still show.
    static func frameworkLogger(_ logger: Logger) -> Logger {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        return quiet
    }
}
