import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PinproxyPolicy
import PinproxyServer
import PinproxyTLS

/// `pinproxy explain HOST[:PORT]` (docs/contract.md §13): what the proxy would do with
/// a request for HOST, and why, from the same files `run` serves. The decision
/// is `RequestExplanation`'s; this prints it and, with `--connect`, handshakes
/// the way the proxy would.
struct ExplainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Say which policy a host matches, what it enforces and the answer a request would get.",
        discussion: """
        Prints the pattern forms the matcher looked up and the policy that won, the action, the TLS \
        settings, the pins active at --at (now by default) and the look-ahead warnings, the Spotify \
        session whose token would be added, and the answer in words. With --connect it also \
        handshakes to the upstream with the policy's TLS settings and prints the pin verdict and the \
        chain seen (a tunnelled host: the TCP dial alone), dialling through the proxy's SSRF guard. \
        Exit status: 0 a request would be served (or tunnelled), 1 it would be refused (by the \
        policy, for --client by the client rules, or with --connect by the handshake) or the \
        configuration is invalid.
        """)

    @Argument(help: "The host a client asks for, with an optional port (default 443).")
    var target: String

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "Judge pins at this instant (RFC 3339, or a date YYYY-MM-DD) instead of now.")
    var at: String?

    @Flag(name: .long, help: "Also handshake with the upstream as the proxy would and print the verdict and the chain.")
    var connect = false

    @Option(name: .long, help: "Answer for this client: a configured identity's name or an IP address (docs/contract.md §15).")
    var client: String?

    func run() async throws {
        let (host, port) = try HostPort.parse(target, defaultPort: 443)
        var instant = Date()
        if let at {
            guard let parsed = DateText.parse(at, bound: .start) else {
                throw ValidationError("--at must be an RFC 3339 time (2026-03-01T00:00:00Z) or a date (2026-03-01), not `\(at)`")
            }
            instant = parsed
        }
        let loader = PolicyLoader(configFile: config)
        let loaded = loader.load()
        guard let snapshot = loaded.snapshot else {
            loaded.errors.forEach { standardError($0.description) }
            standardError("pinproxy explain: the configuration is invalid; run `pinproxy check` for details")
            throw ExitCode(1)
        }
        let explanation = RequestExplanation(host: host, port: port, snapshot: snapshot, at: instant, horizon: loader.horizon)
        print(ExplanationText.render(explanation, files: snapshot.files), terminator: "")
        var refused = if case .refused = explanation.answer { true } else { false }
        if let client {
            // Judged after the host: a host denied to everyone is denied to this client too.
            guard let verdict = ClientAdmission.explain(client: client, host: explanation.host, snapshot: snapshot) else {
                throw ValidationError("--client must name an identity of clients.identities or be an IP address, not `\(client)`")
            }
            switch verdict {
            case .admitted:
                print("client:   \(client) may use this policy")
            case .credentialRequired(let detail):
                print("client:   407 proxy_auth_required: \(detail)")
                refused = true
            case .denied(let detail):
                print("client:   403 client_denied: \(detail)")
                refused = true
            }
        }
        if connect {
            if let policy = snapshot.policy(forHost: explanation.host), policy.spec.action == .intercept {
                refused = try await !connectAndJudge(explanation, policy: policy.spec, network: snapshot.config.network, at: instant)
            } else if case .tunnelled = explanation.answer {
                let policy = snapshot.policy(forHost: explanation.host)?.spec
                refused = try await !dialTunnel(explanation, policy: policy, network: snapshot.config.network)
            } else {
                print("connect:  skipped: a refused host is not dialled by the proxy")
            }
        }
        if refused { throw ExitCode(1) }
    }

    /// A tunnel: the TCP dial the proxy makes before its 200, through the
    /// same SSRF guard. Returns whether the tunnel would open.
    private func dialTunnel(_ explanation: RequestExplanation, policy: HostPolicySpec?, network: PinproxyConfig.Network) async throws -> Bool {
        let target = policy?.upstream.first ?? PinproxyPolicy.HostPort(host: explanation.host, port: explanation.port)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        do {
            let channel = try await ClientBootstrap(group: loop)
                .resolver(UpstreamGuard.resolver(network: network, host: explanation.host, loop: loop))
                .connectTimeout(.seconds(10))
                .connect(host: target.host, port: target.port).get()
            let address = channel.remoteAddress.map(ConnectFailure.address) ?? "\(target)"
            try? await channel.close()
            print("connect:  \(target) (\(address)): the tunnel would open; the app's own TLS runs inside it")
            return true
        } catch {
            if let refusal = UpstreamGuard.refusal(in: error) {
                print("connect:  \(target): refused by the SSRF guard: \(refusal.detail)")
                print("verdict:  403 \(refusal.code.rawValue): the proxy would not dial this address")
            } else {
                print("connect:  \(target): \(ConnectFailure.describe(error, host: target.host, port: target.port))")
                print("verdict:  502 connect_failed: the tunnel would not open")
            }
            return false
        }
    }

    /// Returns whether a request would be served.
    /// The dial goes through the proxy's own SSRF guard (`network`), so an
    /// address the proxy would refuse is refused here too, with its answer.
    private func connectAndJudge(_ explanation: RequestExplanation, policy: HostPolicySpec, network: PinproxyConfig.Network,
                                 at: Date) async throws -> Bool {
        let target = policy.upstream.first ?? PinproxyPolicy.HostPort(host: explanation.host, port: explanation.port)
        let tls = policy.tls
        let configuration = TLSConfiguration(
            role: .client, minimumVersion: tls.minimumVersion, maximumVersion: tls.maximumVersion,
            cipherList: tls.ciphers, cipherSuites: tls.ciphersuites, trustRoots: tls.caFile.map { .file($0) } ?? .system,
            certificateChain: try tls.clientCertificate.map { try Certificate.loadPEM(file: $0) } ?? [],
            privateKey: try tls.clientKey.map { try PrivateKey(pemFile: $0) })
        let result: ChainFetcher.Result
        do {
            result = try await ChainFetcher.fetch(
                host: target.host, port: target.port, serverName: explanation.host, trust: .system, configuration: configuration,
                resolver: { UpstreamGuard.resolver(network: network, host: explanation.host, loop: $0) })
        } catch {
            if let refusal = UpstreamGuard.refusal(in: error) {
                print("connect:  \(target): refused by the SSRF guard: \(refusal.detail)")
                print("verdict:  403 \(refusal.code.rawValue): the proxy would not dial this address")
                return false
            }
            print("connect:  \(target): \(ConnectFailure.describe(error, host: target.host, port: target.port))")
            print("verdict:  502: the handshake did not complete, no request would be served")
            return false
        }
        let info = result.info
        print("connect:  \(target) (\(result.address)), \(info.versionName) \(info.cipher)")
        print("chain seen (leaf to root, as verified):")
        for certificate in info.verified ? info.peerChain : info.sentChain {
            print("  sha256/\(certificate.spkiSHA256)  \(certificate.subject)  not_after \(DateText.format(certificate.notAfter))")
        }
        guard info.verified else {
            print("verdict:  502 verify_failed: \(info.verifyResult) (\(VerifyHint.hint(info.verifyResult, serverName: explanation.host)))")
            return false
        }
        let chain = info.peerChain.map {
            ObservedCertificate(spkiSHA256: $0.spkiSHA256, certificateSHA256: $0.certificateSHA256, subject: $0.subject)
        }
        let evaluation = PinEvaluator.evaluate(chain: chain, pins: policy.pins, now: at)
        if let code = evaluation.verdict.refusalCode {
            print("verdict:  \(evaluation.verdict.metricLabel): a request would get 502 \(code.rawValue)")
            return false
        }
        let detail: String
        switch evaluation.verdict {
        case .match(let pin): detail = "pin sha256/\(pin.hash) is in the chain"
        case .mismatchReported(let reason): detail = "no active pin is in the chain; reported, not refused (\(reason.rawValue))"
        case .noActivePins: detail = "no pin is active; the verified chain alone is trusted"
        case .unpinned: detail = "the policy has no pins; the verified chain alone is trusted"
        case .mismatchEnforced: detail = "no active pin is in the chain"
        }
        print("verdict:  \(evaluation.verdict.metricLabel): \(detail); a request would be served")
        return true
    }
}
