import ArgumentParser
import Foundation
import PinproxyTLS

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the SPKI pin (sha256/BASE64) of certificates in PEM files or of a live server's chain.",
        discussion: """
        Files: every certificate in each file, one line each.
        --connect: handshake to HOST[:PORT] (default port 443) and print every certificate of the
        chain the server sent, leaf first. The chain is shown even if it does not verify; the
        verification result goes to standard error.
        """)

    @Argument(help: "PEM files holding certificates.")
    var files: [String] = []

    @Option(name: .long, help: "Handshake to HOST[:PORT] and print the pins of the chain it sends.")
    var connect: String?

    @Option(name: .long, help: "SNI and hostname to verify (default: HOST).")
    var servername: String?

    @Option(name: .customLong("ca-file"), help: "Verify against this PEM trust store instead of the system's.")
    var caFile: String?

    @Option(name: .long, help: "text (one line a certificate) or yaml (a spki_sha256 list to paste).")
    var format: String = "text"

    func validate() throws {
        guard CertificateListing.Format(rawValue: format) != nil else {
            throw ValidationError("--format must be text or yaml, not \(format)")
        }
        if connect == nil && files.isEmpty {
            throw ValidationError("give PEM files, or --connect HOST[:PORT]")
        }
        if connect != nil && !files.isEmpty {
            throw ValidationError("give PEM files or --connect, not both")
        }
    }

    func run() async throws {
        let format = CertificateListing.Format(rawValue: format)!
        if let connect {
            try await printLiveChain(connect, format: format)
            return
        }
        var failed = false
        for file in files {
            do {
                print(CertificateListing.render(try Certificate.loadPEM(file: file), format: format), terminator: "")
            } catch {
                standardError("pinproxy pin: \(file): \(Self.reason(error))")
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }

    private func printLiveChain(_ target: String, format: CertificateListing.Format) async throws {
        let (host, port) = try HostPort.parse(target, defaultPort: 443)
        let trust: TLSConfiguration.TrustRoots = caFile.map { .file($0) } ?? .system
        do {
            let result = try await ChainFetcher.fetch(host: host, port: port, serverName: servername ?? host, trust: trust)
            let info = result.info
            if format == .yaml {
                print("# chain sent by \(target) (\(result.address)), \(info.versionName) \(info.cipher)")
            }
            print(CertificateListing.render(info.sentChain, format: format), terminator: "")
            if info.verified {
                standardError("verification: ok (\(info.peerChain.count) certificates to a trusted root)")
            } else {
                standardError("verification: FAILED: \(info.verifyResult) — pinproxy would refuse this chain (verify_failed) unless the policy's ca_file trusts it")
            }
        } catch {
            standardError("pinproxy pin: \(target): \(Self.reason(error))")
            throw ExitCode(1)
        }
    }

    static func reason(_ error: any Error) -> String {
        (error as? TLSError)?.reason ?? "\(error)"
    }
}

/// `HOST[:PORT]`, `[v6]:PORT`.
enum HostPort {
    static func parse(_ text: String, defaultPort: Int) throws -> (String, Int) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw ValidationError("bad address \(text)") }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return (host, defaultPort) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port) else {
                throw ValidationError("bad port in \(text)")
            }
            return (host, port)
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            return (text, defaultPort)
        case 2:
            guard let port = Int(parts[1]), (1...65535).contains(port) else { throw ValidationError("bad port in \(text)") }
            return (String(parts[0]), port)
        default:
            return (text, defaultPort)  // a bare IPv6 literal
        }
    }
}

func standardError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
