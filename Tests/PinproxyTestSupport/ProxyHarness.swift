import Foundation

/// A real `pinproxy run` in a temp directory, on ports the kernel chose.
public final class ProxyHarness: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let process: ChildProcess
    public let port: Int
    /// The admin API's port (the "admin API listening" line).
    public var adminPort: Int {
        get throws { try listeningPort("admin API listening") }
    }

    /// The port in the first log line whose message is `message` and whose
    /// `address` is on 127.0.0.1 (pinproxy logs every listener it binds).
    public func listeningPort(_ message: String, timeout: TimeInterval = 20) throws -> Int {
        try Self.listeningPort(message, in: process, timeout: timeout)
    }

    public var caFile: String { directory.file("state/ca.pem") }

    /// The top of a `pinproxy.yaml` in the harness's layout: listeners on
    /// port 0, the CA in `state/`, policies in `etc/policies/`. For tests that
    /// write the whole file themselves.
    public static let baseMainConfig = """
        listen: 127.0.0.1:0
        admin:
          listen: 127.0.0.1:0
        ca:
          cert: ../state/ca.pem
          key: ../state/ca-key.pem
        policies: policies
        """

    /// Writes `etc/pinproxy.yaml` (listeners on port 0 unless `mainConfig` says
    /// otherwise) and `etc/policies/test.yaml`, then starts the proxy.
    /// `launcher`: a command that execs the proxy (`prlimit --nofile=…`).
    /// `environment`: variables added to the test's own (for `${VAR}` in the config).
    public init(policies: String, mainConfig: String = "", directory: TemporaryDirectory? = nil, launcher: [String] = [],
                environment: [String: String] = [:]) throws {
        let dir = try directory ?? TemporaryDirectory("pinproxy-e2e")
        self.directory = dir
        var main = mainConfig
        if !main.contains("listen:") { main = "listen: 127.0.0.1:0\n" + main }
        if !main.contains("admin:") { main += "\nadmin:\n  listen: 127.0.0.1:0\n" }
        if !main.contains("ca:") { main += "\nca:\n  cert: ../state/ca.pem\n  key: ../state/ca-key.pem\n" }
        if !main.contains("policies:") { main += "\npolicies: policies\n" }
        try dir.write("etc/pinproxy.yaml", main)
        try dir.write("etc/policies/test.yaml", policies)
        let command = launcher + [PinproxyBinary.path, "run", "--config", dir.file("etc/pinproxy.yaml")]
        process = try ChildProcess(command[0], Array(command.dropFirst()), directory: dir, name: "pinproxy",
                                   environment: environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                   currentDirectory: dir.path)
        port = try Self.listeningPort("proxy listening", in: process, timeout: 20)
    }

    deinit { process.stop() }

    private static func listeningPort(_ message: String, in process: ChildProcess, timeout: TimeInterval) throws -> Int {
        try process.waitForOutput(timeout: timeout) { output in
            guard let line = output.split(separator: "\n").first(where: { $0.contains("\"\(message)\"") }),
                  let range = line.range(of: #""address":"127.0.0.1:"#) else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
    }

    public var proxyURL: String { "http://127.0.0.1:\(port)" }
    public var log: String { process.outputText }

    /// The JSON access-log lines so far.
    public var accessLog: [[String: Any]] {
        log.split(separator: "\n").compactMap { line in
            guard line.contains("\"pinproxy.access\"") else { return nil }
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    /// Waits until the access log holds `count` lines (they are written when an exchange ends).
    public func waitForAccessLog(count: Int, timeout: TimeInterval = 30) -> [[String: Any]] {
        pollForBlocking(timeout: timeout, every: 0.02) { () -> [[String: Any]]? in
            let lines = accessLog
            return lines.count >= count ? lines : nil
        } ?? accessLog
    }
}

/// What curl saw.
public struct CurlResult: Sendable {
    public var exitCode: Int32
    public var status: Int
    public var connectStatus: Int
    public var headers: [String: String]
    public var body: String
    public var stderr: String

    public var pinproxyError: String? { headers["x-pinproxy-error"] }
}

public enum Curl {
    /// `curl` through the proxy, trusting `caFile` (pinproxy's CA unless said otherwise).
    /// With `output`, the body goes to that file and `body` stays empty.
    public static func run(_ url: String, proxy: ProxyHarness, caFile: String? = nil, extra: [String] = [],
                           output: String? = nil, directory: TemporaryDirectory) throws -> CurlResult {
        try run(url, proxyURL: proxy.proxyURL, caFile: caFile ?? proxy.caFile, extra: extra, output: output, directory: directory)
    }

    public static func run(_ url: String, proxyURL: String?, caFile: String?, extra: [String] = [],
                           output: String? = nil, directory: TemporaryDirectory) throws -> CurlResult {
        let id = UUID().uuidString.prefix(8)
        let bodyFile = output ?? directory.file("curl-\(id).body")
        let headerFile = directory.file("curl-\(id).headers")
        var arguments = ["-sS", "--max-time", "60", "-o", bodyFile, "-D", headerFile, "-w", "%{http_code} %{http_connect}"]
        if let proxyURL { arguments += ["--proxy", proxyURL] }
        if let caFile { arguments += ["--cacert", caFile] }
        arguments += extra + [url]
        let (exitCode, stdout, stderr) = try ChildProcess.runSeparately("/usr/bin/curl", arguments)
        let outData = Data(stdout.utf8)
        let codes = String(decoding: outData, as: UTF8.self).split(separator: " ").map { Int($0) ?? 0 }
        let headerText = TextFile.read(headerFile)
        var headers: [String: String] = [:]
        // The last response's headers (after a CONNECT 200 come the real ones).
        for block in headerText.components(separatedBy: "\r\n\r\n") where block.hasPrefix("HTTP/") {
            headers = [:]
            for line in block.split(separator: "\r\n").dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return CurlResult(
            exitCode: exitCode, status: codes.first ?? 0, connectStatus: codes.count > 1 ? codes[1] : 0,
            headers: headers, body: output == nil ? TextFile.read(bodyFile) : "",
            stderr: stderr)
    }
}

/// A plain TCP client for what curl will not send (CONNECT refusals' bodies, garbage, slow heads).
public final class RawClient {
    public let fd: Int32

    public init(port: Int) throws {
        // Close-on-exec: a child another test spawns meanwhile must not keep
        // this socket open after the test closes it (see ChildProcess).
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TestSupportError("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    private var closed = false

    deinit { if !closed { close(fd) } }

    /// Closes this end now.
    public func closeNow() {
        guard !closed else { return }
        closed = true
        close(fd)
    }

    /// True when bytes arrive within `timeout`.
    public func hasData(within timeout: TimeInterval) -> Bool {
        CooperativePool.refuseBlocking("RawClient.hasData")
        var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&poll, 1, Int32(timeout * 1000)) > 0
    }

    /// False once the peer has closed (EPIPE/ECONNRESET).
    @discardableResult
    public func send(_ text: String) -> Bool {
        send(Array(text.utf8))
    }

    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) == buffer.count
        }
    }

    /// Everything until the peer closes (or the 20 s receive timeout).
    public func readToEnd() -> String {
        CooperativePool.refuseBlocking("RawClient.readToEnd")
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            result += chunk[0..<n]
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// Reads one response head and its Content-Length body.
    public func readResponse() -> (head: String, body: String) {
        CooperativePool.refuseBlocking("RawClient.readResponse")
        var data: [UInt8] = []
        var byte: UInt8 = 0
        while !(data.count >= 4 && data.suffix(4) == [13, 10, 13, 10]) {
            if recv(fd, &byte, 1, 0) <= 0 { break }
            data.append(byte)
        }
        let head = String(decoding: data, as: UTF8.self)
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while body.count < length {
            let n = recv(fd, &chunk, min(chunk.count, length - body.count), 0)
            if n <= 0 { break }
            body += chunk[0..<n]
        }
        return (head, String(decoding: body, as: UTF8.self))
    }

    /// True when the peer has closed: a read returns EOF (or reset) within `timeout`.
    public func isClosedByPeer(within timeout: TimeInterval) -> Bool {
        CooperativePool.refuseBlocking("RawClient.isClosedByPeer")
        var poll = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Glibc.poll(&poll, 1, 100) > 0 {
                var byte: UInt8 = 0
                let n = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
                if n == 0 || (n < 0 && errno != EAGAIN) { return true }
            }
        }
        return false
    }
}
