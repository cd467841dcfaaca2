import ArgumentParser
import Foundation
import PinproxyTLS

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the SPKI pin (sha256/BASE64) of certificates in PEM files or of a live server's chain.",
        discussion: """
        Files: every certificate in each file, one line each (--format yaml for a list to paste).
        --connect: handshake to HOST[:PORT] (default port 443) and print every certificate of the \
        chain the server sent, leaf first, as YAML ready to paste under spki_sha256 (--format text \
        for one line each). The chain is shown even if it does not verify; the verification result \
        goes to standard error. Exit status: 0 the chain verified, 1 no chain (the connection or the \
        handshake failed), 2 the chain was printed but does not verify.
        """)

    @Argument(help: "PEM files holding certificates.")
    var files: [String] = []

    @Option(name: .long, help: "Handshake to HOST[:PORT] and print the pins of the chain it sends.")
    var connect: String?

    @Option(name: .long, help: "SNI and hostname to verify (default: HOST).")
    var servername: String?

    @Option(name: .customLong("ca-file"), help: "Verify against this PEM trust store instead of the system's.")
    var caFile: String?

    @Option(name: .long, help: "text (one line a certificate) or yaml (a spki_sha256 list to paste). Default: text for files, yaml for --connect.")
    var format: String?

    func validate() throws {
        if let format, CertificateListing.Format(rawValue: format) == nil {
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
        if let connect {
            try await printLiveChain(connect, format: format.flatMap(CertificateListing.Format.init) ?? .yaml)
            return
        }
        let format = format.flatMap(CertificateListing.Format.init) ?? .text
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
        let serverName = servername ?? host
        let trust: TLSConfiguration.TrustRoots = caFile.map { .file($0) } ?? .system
        let result: ChainFetcher.Result
        do {
            result = try await ChainFetcher.fetch(host: host, port: port, serverName: serverName, trust: trust)
        } catch {
            standardError("pinproxy pin: \(target): \(ConnectFailure.describe(error, host: host, port: port))")
            throw ExitCode(1)
        }
        let info = result.info
        if format == .yaml {
            print("# chain sent by \(target) (\(result.address)), \(info.versionName) \(info.cipher)")
        }
        print(CertificateListing.render(info.sentChain, format: format), terminator: "")
        if info.verified {
            standardError("verification: ok (\(info.peerChain.count) certificates to a trusted root)")
        } else {
            standardError("verification: FAILED: \(info.verifyResult) — \(VerifyHint.hint(info.verifyResult, serverName: serverName))")
            throw ExitCode(2)
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
