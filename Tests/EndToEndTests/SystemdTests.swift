#if canImport(Glibc)
import Glibc
#endif
import Foundation
import PinproxyTestSupport
import Testing

/// examples/systemd/pinproxy.service and the readiness protocol behind its
/// `Type=notify` (docs/contract.md §13).
@Suite("systemd", .blockingWaits)
struct SystemdTests {
    static let analyze: String? = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: analyze != nil, "systemd-analyze is not installed (apt-get install systemd); skipping"))
    func systemdAnalyzeVerifyAcceptsTheUnitWithoutAWord() throws {
        let dir = try TemporaryDirectory("pinproxy-unit")
        // verify checks that ExecStart's binary exists: point it at the one just built.
        let unit = try Repository.text("examples/systemd/pinproxy.service")
            .replacingOccurrences(of: "/usr/local/bin/pinproxy", with: PinproxyBinary.path)
        try dir.write("pinproxy.service", unit)
        let (status, output) = try ChildProcess.run(Self.analyze!, ["verify", dir.file("pinproxy.service")])
        #expect(status == 0, "\(output)")
        // A key it cannot parse is only a printed warning with status 0.
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "systemd-analyze verify:\n\(output)")
    }

    @Test func theUnitIsHardenedAndNotifies() throws {
        var keys: [String: [String]] = [:]
        for line in try Repository.text("examples/systemd/pinproxy.service").split(separator: "\n") {
            guard !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            keys[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
        }
        let expected: [String: String] = [
            "Type": "notify", "ExecReload": "/bin/kill -HUP $MAINPID", "ProtectSystem": "strict", "NoNewPrivileges": "yes",
            "PrivateTmp": "yes", "StateDirectory": "pinproxy", "StateDirectoryMode": "0700", "DynamicUser": "yes",
            "User": "pinproxy", "LimitNOFILE": "65536", "ProtectHome": "yes",
        ]
        for (key, value) in expected {
            #expect(keys[key] == [value], "\(key)=\(keys[key] ?? [])")
        }
        #expect(keys["ExecStart"]?.first?.hasSuffix("pinproxy run --config /etc/pinproxy/pinproxy.yaml") == true)
    }

    @Test(arguments: [false, true])
    func readyOnceListeningAndStoppingOnSIGTERM(abstract: Bool) throws {
        let dir = try TemporaryDirectory("pinproxy-notify")
        let name = abstract ? "@pinproxy-notify-\(UUID().uuidString.prefix(8))" : dir.file("notify.sock")
        let socket = try NotifySocket(name)
        try dir.write("etc/pinproxy.yaml", """
            \(ProxyHarness.baseMainConfig)
            """)
        try dir.write("etc/policies/p.yaml", "hosts:\n  - match: example.test\n")
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = name
        let proxy = try ChildProcess(PinproxyBinary.path, ["run", "--config", dir.file("etc/pinproxy.yaml")],
                                     directory: dir, name: "pinproxy", environment: environment, currentDirectory: dir.path)
        defer { proxy.stop() }
        let ready = try #require(socket.receive(timeout: 20), "no datagram: \(proxy.outputText)")
        #expect(ready.split(separator: "\n").contains("READY=1"), "\(ready)")
        // READY comes once both listeners are up: both wrote their line before
        // it was sent (the lines reach this test's pipe reader a moment later).
        #expect(pollUntilBlocking(timeout: 10) {
            let log = proxy.outputText
            return log.contains("\"proxy listening\"") && log.contains("\"admin API listening\"")
        }, "\(proxy.outputText)")
        proxy.signal(SIGTERM)
        let stopping = try #require(socket.receive(timeout: 20), "no STOPPING datagram: \(proxy.outputText)")
        #expect(stopping.split(separator: "\n").contains("STOPPING=1"), "\(stopping)")
        #expect(proxy.waitForExit(timeout: 30) == 0)
    }
}

/// A Unix datagram socket bound where `NOTIFY_SOCKET` will point: a path, or `@name` in the abstract namespace.
final class NotifySocket {
    let fd: Int32

    init(_ name: String) throws {
        fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            for (index, byte) in bytes.enumerated() { path[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0 else { throw TestSupportError("bind \(name): \(errno)") }
    }

    deinit { close(fd) }

    /// The next datagram, or nil after `timeout` seconds.
    func receive(timeout: TimeInterval) -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }
}
