import Foundation
import Logging

/// One line of the access log (JSON when `log.format: json`): who asked for
/// what, what pinproxy decided and why, and what moved.
struct AccessRecord {
    var client: String
    var method: String
    var host: String
    var path: String
    var status: Int
    var bytesUp: Int
    var bytesDown: Int
    var seconds: Double
    var policy: String
    var pin: String?
    var upstream: String?
    var error: String?
    var mode: String

    func log(to logger: Logger) {
        var metadata: Logger.Metadata = [
            "client": "\(client)", "method": "\(method)", "host": "\(host)", "path": "\(Self.withoutQuery(path))",
            "status": .stringConvertible(status), "bytes_up": .stringConvertible(bytesUp), "bytes_down": .stringConvertible(bytesDown),
            "duration_ms": .stringConvertible((seconds * 10_000).rounded() / 10), "policy": "\(policy)", "mode": "\(mode)",
        ]
        if let pin { metadata["pin"] = "\(pin)" }
        if let upstream { metadata["upstream"] = "\(upstream)" }
        if let error { metadata["error"] = "\(error)" }
        logger.info("request", metadata: metadata)
    }

    /// Query strings carry tokens and personal data; the log keeps the path only.
    static func withoutQuery(_ target: String) -> String {
        var path = target
        if let target = AbsoluteTarget(target) { path = target.originForm }
        return String(path.prefix { $0 != "?" })
    }
}
