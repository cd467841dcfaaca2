import Logging
import PinproxyPolicy
import PinproxyServer

/// Installs the process's one log handler factory, from `log.format` and
/// `log.level`. swift-log resolves a `Logger`'s handler when the logger is
/// made, so this must run before anything makes one: a logger made earlier
/// keeps swift-log's default (text on standard error) for its whole life.
enum LogFormatBootstrap {
    static func bootstrap(_ log: PinproxyConfig.Log) {
        LoggingSystem.bootstrap { label in handler(label: label, log) }
    }

    static func handler(label: String, _ log: PinproxyConfig.Log) -> any LogHandler {
        switch log.format {
        case .json:
            return JSONLogHandler(label: label, level: log.level)
        case .text:
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = log.level
            return handler
        }
    }
}
