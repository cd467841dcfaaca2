import Foundation

/// A real `openssl s_server` on 127.0.0.1, on a port the kernel chose, stopped by PID.
public final class OpenSSLServer: @unchecked Sendable {
    public let process: ChildProcess
    public let port: Int

    /// `arguments` adds to `-cert/-key/-cert_chain`; the default serves a status page (`-www`).
    public init(directory: TemporaryDirectory, certificate: String, key: String, chain: String? = nil,
                arguments: [String] = ["-www"]) throws {
        var all = ["s_server", "-accept", "127.0.0.1:0", "-cert", certificate, "-key", key]
        if let chain { all += ["-cert_chain", chain] }
        process = try ChildProcess("openssl", all + arguments, directory: directory, name: "s_server-\(UUID().uuidString.prefix(8))")
        port = try process.waitForOutput { output in
            guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }),
                  let port = line.split(separator: ":").last.flatMap({ Int($0) }) else { return nil }
            return port
        }
    }

    public func stop() { process.stop() }
}
