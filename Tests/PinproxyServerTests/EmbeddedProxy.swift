import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS
import PinproxyTestSupport

@testable import PinproxyServer

/// One client connection of the proxy on an `EmbeddedChannel`, with the
/// listener's real pipeline (`ProxyServer.configureClient`: head timer, HTTP
/// server codec, `HTTPExchangeHandler`, `ConnectHandler`) over services built
/// from a temp-dir policy set. Bytes go in as the app would send them and come
/// out as the app would read them; the access log and the instrumentation are
/// recorded. No sockets, no clock: nothing here dials an upstream.
final class EmbeddedProxy {
    /// `default_action: deny` (so `nopolicy.test` is refused by default).
    static let policies = """
        hosts:
          - match: denied.test
            action: deny
          - match: intercept.test
            action: intercept
          - match: tunnel.test
            action: tunnel
          - match: ws-denied.test
            action: intercept
            websocket: deny
        """

    let directory: TemporaryDirectory
    let services: ProxyServices
    let channel: EmbeddedChannel
    let recorder = Recorder()

    /// `client` is the app's address (the ACL allows 127.0.0.0/8 and ::1).
    init(client: String = "127.0.0.1", maxHeaderBytes: Int = 4096) throws {
        directory = try TemporaryDirectory("pinproxy-embedded")
        try directory.write("etc/pinproxy.yaml", """
            policies: policies
            default_action: deny
            limits:
              max_header_bytes: \(maxHeaderBytes)
            """)
        try directory.write("etc/policies/p.yaml", Self.policies)
        let loader = PolicyLoader(configFile: directory.file("etc/pinproxy.yaml"), environment: [:], workingDirectory: directory.path)
        guard let snapshot = loader.load().snapshot else { throw TestSupportError("the test policy set did not load") }
        let recorder = self.recorder
        services = try ProxyServices(
            store: PolicyStore(loader: loader, initial: snapshot), ca: try CertificateAuthority.create(),
            instrumentation: RecordingInstrumentation(recorder),
            logger: Logger(label: "pinproxy") { RecordingLogHandler(label: $0, recorder: recorder) },
            accessLog: Logger(label: "pinproxy.access") { RecordingLogHandler(label: $0, recorder: recorder, logLevel: .info) })
        channel = EmbeddedChannel()
        // Active first, as an accepted socket is by the time its first write
        // completes (the ACL's refusal closes only an active channel). An
        // embedded channel's remote address is the one it "connected" to.
        try channel.connect(to: SocketAddress(ipAddress: client, port: 50_000)).wait()
        try ProxyServer.configureClient(channel, services: services)
    }

    deinit {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    /// The app sends `text` (one read), and the loop runs what it scheduled.
    func send(_ text: String) throws {
        try send(ByteBuffer(string: text))
    }

    func send(_ bytes: ByteBuffer) throws {
        try channel.writeInbound(bytes)
        channel.embeddedEventLoop.run()
    }

    /// Everything written to the app so far, as bytes.
    func outputBytes() throws -> ByteBuffer {
        var all = ByteBuffer()
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            all.writeImmutableBuffer(buffer)
        }
        return all
    }

    /// Everything written to the app so far, as text.
    func output() throws -> String {
        String(buffer: try outputBytes())
    }

    /// The responses written to the app so far.
    func responses() throws -> [RawResponse] {
        try RawResponse.parseAll(output())
    }

    var isOpen: Bool { channel.isActive }

    /// The access lines so far, as their metadata.
    var accessLines: [[String: String]] {
        recorder.logs.filter { $0.label == "pinproxy.access" && $0.message == "request" }.map(\.metadata)
    }
}

/// One HTTP/1.1 response as the app reads it (a Content-Length body).
struct RawResponse {
    var statusLine: String
    var status: Int
    /// Names lowercased; the last value wins.
    var headers: [String: String]
    var body: String

    /// The JSON body of a refusal.
    var json: [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    }

    /// Every complete response in `text`, in order (bounded by its length).
    static func parseAll(_ text: String) throws -> [RawResponse] {
        var rest = Substring(text)
        var out: [RawResponse] = []
        while !rest.isEmpty {
            guard let end = rest.range(of: "\r\n\r\n") else { throw TestSupportError("an incomplete head: \(rest)") }
            let lines = rest[..<end.lowerBound].components(separatedBy: "\r\n")
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { throw TestSupportError("not a header line: \(line)") }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let parts = lines[0].split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw TestSupportError("not a status line: \(lines[0])")
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            let bodyStart = end.upperBound
            let bytes = rest[bodyStart...].utf8
            guard bytes.count >= length else { throw TestSupportError("a body shorter than its Content-Length: \(rest)") }
            let bodyEnd = bytes.index(bytes.startIndex, offsetBy: length)
            out.append(RawResponse(statusLine: lines[0], status: status, headers: headers, body: String(rest[bodyStart..<bodyEnd])))
            rest = rest[bodyEnd...]
        }
        return out
    }
}

/// What the handlers reported: log lines (the access log among them) and instrumentation calls.
final class Recorder: @unchecked Sendable {  // guarded by `lock`
    struct Line {
        var label: String
        var level: Logger.Level
        var message: String
        /// The metadata as logged (arrays and dictionaries kept).
        var values: Logger.Metadata
        /// The same, each value as its text.
        var metadata: [String: String] { values.mapValues { "\($0)" } }
    }

    private let lock = NSLock()
    private var _logs: [Line] = []
    private var _denied: [String] = []
    private var _completed: [(policy: String, status: Int)] = []
    private var _clientHandshakes: [String] = []
    private var _minted = 0
    private var _trafficRecorders = 0

    var logs: [Line] { lock.withLock { _logs } }
    /// `denied_total` reasons, in order.
    var denied: [String] { lock.withLock { _denied } }
    /// `requests_total` (policy label, status), in order.
    var completed: [(policy: String, status: Int)] { lock.withLock { _completed } }
    var clientHandshakes: [String] { lock.withLock { _clientHandshakes } }
    var minted: Int { lock.withLock { _minted } }
    /// How many times a handler asked for the series to count its requests in.
    var trafficRecorders: Int { lock.withLock { _trafficRecorders } }

    func log(_ line: Line) { lock.withLock { _logs.append(line) } }
    func denied(_ code: String) { lock.withLock { _denied.append(code) } }
    func completed(_ policy: String, _ status: Int) { lock.withLock { _completed.append((policy, status)) } }
    func clientHandshake(_ result: String) { lock.withLock { _clientHandshakes.append(result) } }
    func mint() { lock.withLock { _minted += 1 } }
    func resolvedTraffic() { lock.withLock { _trafficRecorders += 1 } }
}

struct RecordingLogHandler: LogHandler {
    let label: String
    let recorder: Recorder
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, recorder: Recorder, logLevel: Logger.Level = .trace) {
        self.label = label
        self.recorder = recorder
        self.logLevel = logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
        recorder.log(.init(label: label, level: event.level, message: event.message.description, values: all))
    }
}

struct RecordingInstrumentation: ProxyInstrumentation {
    let recorder: Recorder
    init(_ recorder: Recorder) { self.recorder = recorder }

    func requestCompleted(policy: HostPolicy?, status: Int, seconds: Double, client: String, protocol: RequestProtocol) {
        recorder.completed(policy?.metricLabel ?? "_none", status)
    }
    func upstreamStreams(policy: HostPolicy?, delta: Int) {}
    func denied(code: ProxyError.Code, client: String) { recorder.denied(code.rawValue) }
    func proxyAuthFailed(client: String) {}
    func upstreamHandshake(policy: HostPolicy?, result: UpstreamHandshakeResult, seconds: Double) {}
    func upstreamTLS(policy: HostPolicy?, version: String, cipher: String, leafNotAfter: Date?) {}
    func pinValidation(policy: HostPolicy?, verdict: PinVerdict) {}
    func clientConnections(delta: Int) {}
    func upstreamConnections(policy: HostPolicy?, delta: Int) {}
    func bytes(policy: HostPolicy?, up: Int, down: Int) {}
    func mintedCertificate() { recorder.mint() }
    func clientHandshake(_ result: ClientHandshakeResult) { recorder.clientHandshake(result.rawValue) }
    func probe(policy: HostPolicy, success: Bool) {}
    func trafficRecorder(policy: HostPolicy?) -> any TrafficRecorder {
        recorder.resolvedTraffic()
        return ForwardingTrafficRecorder(instrumentation: self, policy: policy)
    }
}
