import ArgumentParser
import Foundation
import PinproxyPolicy

/// `pinproxy pins`: pins learned from traffic (docs/contract.md §13).
struct PinsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pins",
        abstract: "Pins learned from the chains upstreams presented to a running pinproxy.",
        subcommands: [PinsSuggestCommand.self])
}

/// `pinproxy pins suggest`: reads `observed` from a running proxy's `/policies`
/// and prints, per host, a `spki_sha256:` list ready to paste under `pins:`.
struct PinsSuggestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suggest",
        abstract: "Print a ready spki_sha256 list per host from the chains a running pinproxy has seen.",
        discussion: """
        The intended workflow: run a new host with `pins: {mode: report, ...}` (or unpinned) for a while, \
        then paste what this prints. It picks an intermediate and the root above it (both outlive the \
        leaf, so routine leaf renewals keep matching) from the chain that matched the policy's pins (or, \
        in the learning phase, verified with no pin to compare), and says why in comments; a chain the \
        proxy refused or only reported is used only when nothing else was seen, under a WARNING line. \
        not_after is each certificate's own. The admin API is --admin, else the admin.listen of --config. \
        Exit status: 0 printed, 1 the admin API could not be read, 2 nothing observed \
        (for --host: that host was not seen).
        """)

    @Option(name: .long, help: "The admin API's base URL (default: from the config's admin.listen).")
    var admin: String?

    @Option(name: .long, help: "The main config file whose admin.listen names the admin API (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "Only this upstream host name.")
    var host: String?

    @Option(name: .long, help: "Spaces before every line printed; 6 pastes it under the pins: of a policy in a hosts: list.")
    var indent = 6

    func run() async throws {
        let base = try admin ?? Self.adminURL(config: config)
        let url = base.hasSuffix("/") ? base + "policies" : base + "/policies"
        guard let endpoint = URL(string: url), endpoint.scheme?.lowercased() == "http", let endpointHost = endpoint.host,
              !endpointHost.isEmpty else {
            throw ValidationError("--admin must be the admin API's http:// URL, such as http://127.0.0.1:9090, not `\(base)`")
        }
        let hosts: [ObservedHost]
        do {
            let answer = try await AdminRequest.get(host: endpointHost.trimmingCharacters(in: CharacterSet(charactersIn: "[]")),
                                                    port: endpoint.port ?? 80, path: endpoint.path.isEmpty ? "/" : endpoint.path)
            guard answer.status == 200 else {
                standardError("pinproxy pins suggest: \(url) answered HTTP \(answer.status), not pinproxy's /policies document; is \(base) pinproxy's admin API?")
                throw ExitCode(1)
            }
            do {
                hosts = try ObservedReading.hosts(from: Data(answer.body.readableBytesView))
            } catch {
                standardError("pinproxy pins suggest: \(url) did not answer with pinproxy's /policies document (\(error)); is \(base) pinproxy's admin API?")
                throw ExitCode(1)
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            // One sentence, not an error dump: what was asked, what happened, what to check.
            standardError("pinproxy pins suggest: cannot read \(url): \((error as? AdminRequest.Failure)?.reason ?? "\(error)"); is pinproxy running, "
                          + "and is that its admin.listen (--admin URL or --config FILE)?")
            throw ExitCode(1)
        }
        let wanted = host.map(HostPattern.normalize)
        let chosen = hosts.filter { wanted == nil || $0.host == wanted }
        let now = Date()
        let suggestions = chosen.compactMap { PinSuggestion.suggest(for: $0, now: now) }
        guard !suggestions.isEmpty else {
            standardError("pinproxy pins suggest: no chain observed" + (host.map { " for \($0)" } ?? "")
                          + "; send traffic through the proxy or wait for a probe, then ask again")
            throw ExitCode(2)
        }
        print(suggestions.map { $0.yaml(indent: indent) }.joined(separator: "\n"), terminator: "")
    }

    /// `http://HOST:PORT` of the config's `admin.listen`; a wildcard address is asked on loopback.
    static func adminURL(config: String?) throws -> String {
        let (loaded, diagnostics) = PolicyLoader(configFile: config).loadMainConfig()
        guard let loaded else {
            diagnostics.errors.forEach { standardError($0.description) }
            standardError("pinproxy pins suggest: the configuration is invalid; give --admin URL, or run `pinproxy check`")
            throw ExitCode(1)
        }
        var host = loaded.admin.listen.host
        if host == "0.0.0.0" || host.isEmpty { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        return "http://\(PinproxyPolicy.HostPort.bracketed(host)):\(loaded.admin.listen.port)"
    }
}

/// `observed` of `GET /policies` back into the model `PinSuggestion` takes.
enum ObservedReading {
    private struct Document: Decodable { var observed: [Host] }
    private struct Host: Decodable {
        var host: String
        var policy: String
        var last_seen: String
        var chains: [Chain]
    }
    private struct Chain: Decodable {
        var first_seen: String
        var last_seen: String
        var count: Int
        var verdict: String?
        var certificates: [Cert]
    }
    private struct Cert: Decodable {
        var pin: String
        var subject: String
        var issuer: String
        var not_before: String
        var not_after: String
    }

    struct BadDate: Error, CustomStringConvertible {
        var text: String
        var description: String { "not an RFC 3339 time: \(text)" }
    }

    static func hosts(from data: Data) throws -> [ObservedHost] {
        func date(_ text: String) throws -> Date {
            guard let date = DateText.parse(text, bound: .start) else { throw BadDate(text: text) }
            return date
        }
        return try JSONDecoder().decode(Document.self, from: data).observed.map { host in
            ObservedHost(host: host.host, policy: host.policy, chains: try host.chains.map { chain in
                ObservedChain(certificates: try chain.certificates.map {
                    ObservedCertificateInfo(spkiSHA256: $0.pin, subject: $0.subject, issuer: $0.issuer,
                                            notBefore: try date($0.not_before), notAfter: try date($0.not_after))
                }, firstSeen: try date(chain.first_seen), lastSeen: try date(chain.last_seen), count: chain.count,
                   verdict: chain.verdict)
            }, lastSeen: try date(host.last_seen))
        }
    }
}
