import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
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
        The intended workflow: run a new host with `pins: {mode: report, ...}` (or unpinned) for a while,
        then paste what this prints. It picks an intermediate and the root above it (both outlive the
        leaf, so routine leaf renewals keep matching) and says why in comments; not_after is each
        certificate's own. Exit status: 0 printed, 1 the admin API could not be read, 2 nothing observed
        (for --host: that host was not seen).
        """)

    @Option(name: .long, help: "The admin API's base URL.")
    var admin = "http://127.0.0.1:9090"

    @Option(name: .long, help: "Only this upstream host name.")
    var host: String?

    func run() async throws {
        let url = admin.hasSuffix("/") ? admin + "policies" : admin + "/policies"
        guard let endpoint = URL(string: url) else { throw ValidationError("--admin must be a URL, not `\(admin)`") }
        let hosts: [ObservedHost]
        do {
            let (data, response) = try await URLSession.shared.data(from: endpoint)
            guard let status = (response as? HTTPURLResponse)?.statusCode, status == 200 else {
                throw ValidationError("\(url) answered \((response as? HTTPURLResponse)?.statusCode ?? 0)")
            }
            hosts = try ObservedReading.hosts(from: data)
        } catch {
            standardError("pinproxy pins suggest: cannot read \(url): \(error)")
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
        print(suggestions.map(\.yaml).joined(separator: "\n"), terminator: "")
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
                }, firstSeen: try date(chain.first_seen), lastSeen: try date(chain.last_seen), count: chain.count)
            }, lastSeen: try date(host.last_seen))
        }
    }
}
