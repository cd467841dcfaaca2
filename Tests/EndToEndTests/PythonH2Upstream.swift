import Foundation
import PinproxyTestSupport

/// Scripts/h2_upstream.py started for one test: Python's `h2` behind Python
/// `ssl` (ALPN h2) on a loopback port, serving `host` with the leaf of a
/// fresh `TestPKI`, answering as its `mode` says. Stopped with `stop()`.
struct PythonH2Upstream {
    let process: ChildProcess
    let port: Int
    let pki: TestPKI

    init(mode: String, host: String, in dir: TemporaryDirectory) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/h2_upstream.py").path
        pki = try TestPKI.make(in: dir, names: [host])
        process = try ChildProcess("python3", ["-u", script, pki.chainFile, pki.leafKey, mode], directory: dir, name: "h2-upstream-\(mode)")
        do {
            port = try process.waitForOutput(timeout: 20) { text in
                text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
            }
        } catch {
            process.stop()
            throw error
        }
    }

    /// The policy entry that sends `host` to this upstream, trusting its root.
    func policy(_ host: String, _ extra: String = "") -> String {
        """
        hosts:
          - match: \(host)
            upstream: 127.0.0.1:\(port)
            tls: { ca_file: \(pki.rootCertificate) }
            probe_interval: 0
        \(extra)
        """
    }

    func stop() {
        process.stop()
    }
}
