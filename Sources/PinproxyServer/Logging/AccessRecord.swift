import Foundation
import Logging
import NIOCore
import PinproxyMetrics
import PinproxyPolicy

/// How a request reached pinproxy: the access line's `mode` (docs/contract.md).
/// The raw value is the text, written only by `AccessRecord`.
enum AccessMode: String, Sendable, CaseIterable {
    /// A plain-HTTP request in absolute form, forwarded.
    case forward
    /// A request inside an intercepted CONNECT.
    case intercept
    /// A blind tunnel: bytes spliced, nothing read.
    case tunnel
    /// A CONNECT refused before a tunnel or an interception began.
    case connect
    /// A connection the transparent listener took (docs/contract.md §16).
    case transparent
}

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
    var mode: AccessMode
    /// The configured identity the client proved; `-` in the line when none.
    var identity: String? = nil
    /// The app's HTTP version; the line names it only when it is HTTP/2.
    var clientProtocol: ClientProtocol = .http1
    /// A refusal's detail that its body withheld from an unauthenticated
    /// client (docs/contract.md §4): the operator reads it here.
    var detail: String? = nil

    func log(to accessLog: AccessLog) {
        switch accessLog.destination {
        case .json(let handler): handler.writer.appendLine { render(label: handler.label, into: &$0) }
        case .logger(let logger): log(to: logger)
        case .off: break
        }
    }

    /// The JSON line as a string (tests; the server renders into the writer).
    func render(label: String) -> String {
        var out = ByteBuffer()
        render(label: label, into: &out)
        return String(buffer: out)
    }

    /// The JSON line, keys in the order `JSONLogHandler` gives any line
    /// (alphabetical after the four common ones), without building
    /// `Logger.Metadata` and without making a string: written piece by piece
    /// into room reserved once in `out`, which is the log writer's pending
    /// batch (this runs once a request).
    func render(label: String, into out: inout ByteBuffer) {
        LogLineBytes.write(into: &out, atMost: lineBound(label: label)) { line in
            JSONLogHandler.writeLineStart(level: .info, label: label, message: "request", into: &line)
            line.writeStaticString(",\"bytes_down\":"); line.writeDecimal(bytesDown)
            line.writeStaticString(",\"bytes_up\":"); line.writeDecimal(bytesUp)
            line.writeStaticString(",\"client\":"); line.writeJSONQuoted(client)
            if let detail { line.writeStaticString(",\"detail\":"); line.writeJSONQuoted(detail) }
            line.writeStaticString(",\"duration_ms\":"); line.writeTenths((seconds * 10_000).rounded())
            if let error { line.writeStaticString(",\"error\":"); line.writeJSONQuoted(error) }
            line.writeStaticString(",\"host\":"); line.writeJSONQuoted(host)
            line.writeStaticString(",\"identity\":"); line.writeJSONQuoted(identity ?? "-")
            line.writeStaticString(",\"method\":"); line.writeJSONQuoted(method)
            line.writeStaticString(",\"mode\":"); line.writeJSONQuoted(mode.rawValue)
            line.writeStaticString(",\"path\":"); line.writeJSONQuoted(Self.pathWithoutQuery(path))
            if let pin { line.writeStaticString(",\"pin\":"); line.writeJSONQuoted(pin) }
            line.writeStaticString(",\"policy\":"); line.writeJSONQuoted(policy)
            if clientProtocol != .http1 { line.writeStaticString(",\"protocol\":"); line.writeJSONQuoted(clientProtocol.rawValue) }
            line.writeStaticString(",\"status\":"); line.writeDecimal(status)
            if let upstream { line.writeStaticString(",\"upstream\":"); line.writeJSONQuoted(upstream) }
            line.writeStaticString("}\n")
        }
    }

    /// The most bytes `render` writes: the line's start, every key (under
    /// 200 bytes together), three numbers and a duration, and each string
    /// quoted at its longest.
    private func lineBound(label: String) -> Int {
        func quoted(_ text: String?) -> Int { text.map(LogLineBytes.quotedBound) ?? 0 }
        var bound = JSONLogHandler.lineStartBound(label: label, message: "request") + 200 + 4 * LogLineBytes.numberBound
        bound += quoted(client) + quoted(host) + quoted(identity ?? "-") + quoted(method)
        bound += quoted(mode.rawValue) + quoted(path) + quoted(policy) + quoted(clientProtocol.rawValue)
        bound += quoted(detail) + quoted(error) + quoted(pin) + quoted(upstream)
        return bound
    }

    func log(to logger: Logger) {
        var metadata: Logger.Metadata = [
            "client": "\(client)", "method": "\(method)", "host": "\(host)", "path": "\(Self.withoutQuery(path))",
            "status": .stringConvertible(status), "bytes_up": .stringConvertible(bytesUp), "bytes_down": .stringConvertible(bytesDown),
            "duration_ms": .stringConvertible((seconds * 10_000).rounded() / 10), "policy": "\(policy)", "mode": "\(mode.rawValue)",
            "identity": "\(identity ?? "-")",
        ]
        if let pin { metadata["pin"] = "\(pin)" }
        if let upstream { metadata["upstream"] = "\(upstream)" }
        if let error { metadata["error"] = "\(error)" }
        if let detail { metadata["detail"] = "\(detail)" }
        if clientProtocol != .http1 { metadata["protocol"] = "\(clientProtocol.rawValue)" }
        logger.info("request", metadata: metadata)
    }

    /// Query strings carry tokens and personal data; the log keeps the path only.
    static func withoutQuery(_ target: String) -> String {
        String(pathWithoutQuery(target))
    }

    /// As above, as a slice of `target` when it is origin-form (every
    /// intercepted request): no string is made for the common line.
    static func pathWithoutQuery(_ target: String) -> Substring {
        var path = Substring(target)
        if path.utf8.first != UInt8(ascii: "/"), let target = AbsoluteTarget(target) { path = Substring(target.originForm) }
        guard let query = path.utf8.firstIndex(of: UInt8(ascii: "?")) else { return path }
        return path[..<query]
    }
}

/// Where access records go, decided once per server: rendered straight to a
/// JSON line for `JSONLogHandler` (the hot path), through swift-log for any
/// other handler (`log.format: text`), nowhere when the level is above `info`.
struct AccessLog {
    enum Destination {
        case json(JSONLogHandler)
        case logger(Logger)
        case off
    }

    let destination: Destination

    init(_ logger: Logger) {
        if logger.logLevel > .info {
            destination = .off
        } else if let json = logger.handler as? JSONLogHandler, json.metadata.isEmpty {
            destination = .json(json)
        } else {
            destination = .logger(logger)
        }
    }
}

extension ClientProtocol {
    /// The `protocol` label of `requests_total`.
    var metricLabel: RequestProtocol {
        switch self {
        case .http1: return .http1
        case .h2: return .h2
        }
    }
}
