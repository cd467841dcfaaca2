import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyPolicy
import PinproxyTLS

/// DNS → SSRF guard → TCP (fallback targets, retries) → TLS with the host's
/// policy → pin evaluation. Nothing is sent before all of it has passed.
final class UpstreamConnector: Sendable {
    /// The SSRF guard of the snapshot serving now: read at each dial, so a
    /// reload's `network.*` applies to the next dial (docs/contract.md §3, Reload).
    var addressGuard: AddressGuard { currentGuard() }
    private let currentGuard: @Sendable () -> AddressGuard
    let instrumentation: any ProxyInstrumentation
    let clock: @Sendable () -> Date
    /// Chains and verdicts for the status page and `pins suggest` (docs/contract.md §13).
    let observed = ObservedPins()
    let logger: Logger
    /// Set only by the fuzz targets (see `UpstreamDialer`).
    let dialer: UpstreamDialer?

    init(addressGuard: @escaping @Sendable () -> AddressGuard, instrumentation: any ProxyInstrumentation,
         clock: @escaping @Sendable () -> Date = { Date() }, logger: Logger, dialer: UpstreamDialer? = nil) {
        self.dialer = dialer
        self.currentGuard = addressGuard
        self.instrumentation = instrumentation
        self.clock = clock
        self.logger = logger
    }

    // MARK: HTTP(S) connections for the pool

    func connect(_ plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<UpstreamConnection> {
        if let dialer { return dialer.connection(plan, loop) }
        // Set once, by the install on the channel that won the dial.
        let installed = NIOLockedValueBox<(UpstreamPipeline, NIOLockedValueBox<PinEvaluation?>)?>(nil)
        let handshake = NIOLockedValueBox<TLSHandshakeInfo?>(nil)
        let started = NIODeadline.now()
        return UpstreamConnectDriver.connect(plan, addressGuard: addressGuard, on: loop, awaitsHandshake: true) { channel in
            let evaluation = NIOLockedValueBox<PinEvaluation?>(nil)
            var tls: TLSHandler?
            if plan.tls {
                guard let policy = plan.policy else { throw ProxyError(.connectFailed, host: plan.host, detail: "a TLS dial with no policy") }
                // The policy's ALPN offer decides; the pipeline's shape follows the server's choice.
                tls = try TLSHandler(
                    clientContext: policy.tlsContext, serverName: plan.host, verifyHostname: plan.host,
                    sessionKey: "\(policy.digest)|\(plan.host):\(plan.port)",
                    applicationProtocols: plan.applicationProtocols,
                    verifier: self.pinVerifier(plan: plan, policy: policy, into: evaluation))
            }
            let pipeline = try UpstreamPipeline.configure(channel, tls: tls)
            installed.withLockedValue { $0 = (pipeline, evaluation) }
            return pipeline.ready.futureResult.map { info in handshake.withLockedValue { $0 = info } }
        }.flatMapThrowing { channel -> UpstreamConnection in
            let (pipeline, evaluation) = installed.withLockedValue { $0! }
            let info = handshake.withLockedValue { $0 }
            if let multiplexer = pipeline.multiplexer {
                return UpstreamConnection(
                    channel: channel, key: plan.poolKey, multiplexer: multiplexer,
                    pinEvaluation: evaluation.withLockedValue { $0 }, handshake: info)
            }
            guard let handler = pipeline.http1 else {
                channel.close(promise: nil)
                throw ProxyError(.connectFailed, host: plan.host, detail: "no HTTP layers after the handshake with \(plan.host)")
            }
            return UpstreamConnection(
                channel: channel, key: plan.poolKey, handler: handler,
                pinEvaluation: evaluation.withLockedValue { $0 }, handshake: info)
        }.always { result in
            guard plan.tls else { return }
            guard plan.countsTraffic else {
                if case .success(let connection) = result, let info = connection.handshake {
                    self.instrumentation.upstreamTLS(policy: plan.policy, version: info.versionName, cipher: info.cipher, leafNotAfter: info.leafNotAfter)
                }
                return
            }
            let seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
            switch result {
            case .success(let connection):
                self.instrumentation.upstreamHandshake(policy: plan.policy, result: .ok, seconds: seconds)
                if let info = connection.handshake {
                    self.instrumentation.upstreamTLS(policy: plan.policy, version: info.versionName, cipher: info.cipher, leafNotAfter: info.leafNotAfter)
                }
            case .failure(let error):
                self.instrumentation.upstreamHandshake(policy: plan.policy, result: Self.handshakeResult(error), seconds: seconds)
            }
        }
    }

    /// The pin check that runs on OpenSSL's verified chain, before any byte of
    /// the request moves (docs/contract.md §3, "Pin evaluation").
    private func pinVerifier(plan: DialPlan, policy: HostPolicy, into box: NIOLockedValueBox<PinEvaluation?>) -> TLSPeerVerifier {
        let clock = self.clock
        let instrumentation = self.instrumentation
        let logger = self.logger
        let observed = self.observed
        return { info in
            let chain = info.peerChain.map {
                ObservedCertificate(spkiSHA256: $0.spkiSHA256, certificateSHA256: $0.certificateSHA256, subject: $0.subject, issuer: $0.issuer)
            }
            let evaluation = PinEvaluator.evaluate(chain: chain, pins: policy.spec.pins, now: clock())
            box.withLockedValue { $0 = evaluation }
            // Probes record their verdict on the chain too (what `pins suggest`
            // weighs), but only traffic counts in the per-policy verdicts.
            observed.record(host: plan.host, policy: policy, chain: info.peerChain,
                            verdict: evaluation.verdict, countsTraffic: plan.countsTraffic, at: clock())
            if plan.countsTraffic {
                instrumentation.pinValidation(policy: policy, verdict: evaluation.verdict)
            }
            // JSON arrays in the log, leaf to root, so tools need not split a string;
            // `observed_chain` adds subject and issuer to tell a rotation from an interception.
            let observedList = Logger.MetadataValue.array(evaluation.observedPins.map { .string($0) })
            let chainList = Logger.MetadataValue.array(evaluation.observed.map {
                .dictionary(["pin": "sha256/\($0.spkiSHA256)", "subject": "\($0.subject ?? "")", "issuer": "\($0.issuer ?? "")"])
            })
            switch evaluation.verdict {
            case .mismatchEnforced, .noActivePins(.enforced):
                let code: ProxyError.Code = evaluation.verdict.refusalCode ?? .pinMismatch
                logger.error("upstream pin check failed", metadata: [
                    "host": "\(plan.host)", "policy": "\(policy.metricLabel)", "file": "\(policy.spec.file)",
                    "verdict": "\(evaluation.verdict.metricLabel)", "observed_pins": observedList, "observed_chain": chainList,
                ])
                let what = code == .pinsExpired ? "no pin of the policy is active any more" : "no active pin matches the verified chain"
                return .reject(ProxyError(code, host: plan.host, detail: "\(what); observed (leaf to root): \(evaluation.observedChain)"))
            case .mismatchReported(let reason):
                logger.warning("upstream pin mismatch reported, not enforced", metadata: [
                    "host": "\(plan.host)", "policy": "\(policy.metricLabel)", "file": "\(policy.spec.file)",
                    "reason": "\(reason.rawValue)", "observed_pins": observedList, "observed_chain": chainList,
                ])
                return .accept
            case .match, .noActivePins(.chainOnly), .unpinned:
                return .accept
            }
        }
    }

    // MARK: Raw TCP (tunnels)
    /// A TCP connection to the plan's targets (through the parent proxy, if
    /// the policy names one): each round tries every target in order (the
    /// policy's `upstream` list is a fallback list), up to `retries` more
    /// rounds. Each target is dialled by NIO's Happy Eyeballs through a
    /// `GuardedResolver`, so only vetted addresses are ever dialled. A policy
    /// refusal is final. `UpstreamConnectMachine` makes these decisions.
    func dial(_ plan: DialPlan, on loop: any EventLoop,
              initializer: @escaping @Sendable (any Channel) throws -> Void) -> EventLoopFuture<any Channel> {
        if let dialer { return dialer.channel(plan, loop, initializer) }
        return UpstreamConnectDriver.connect(plan, addressGuard: addressGuard, on: loop, awaitsHandshake: false) { channel in
            try initializer(channel)
            return nil
        }
    }

    /// A failed dial as the contract's refusal: the guard's own refusal, a
    /// timeout (504), or `connect_failed` naming what was tried.
    static func dialFailure(_ error: any Error, target: HostPort, plan: DialPlan) -> ProxyError {
        switch error {
        case let refusal as ProxyError:
            return refusal
        case ChannelError.connectTimeout:
            return ProxyError(.upstreamTimeout, host: plan.host,
                              detail: "connecting to \(target.host):\(target.port) took longer than \(plan.connectTimeout.seconds) s")
        case let connection as NIOConnectionError:
            if let refusal = (connection.dnsAError ?? connection.dnsAAAAError) as? ProxyError { return refusal }
            let tried = connection.connectionErrors.map { "\($0.target): \(describe($0.error))" }.joined(separator: "; ")
            return ProxyError(.connectFailed, host: plan.host, detail: "connecting to \(target.host):\(target.port): \(tried.isEmpty ? "\(connection)" : tried)")
        default:
            return ProxyError(.connectFailed, host: plan.host, detail: "connecting to \(target.host):\(target.port): \(describe(error))")
        }
    }

    // MARK: Error mapping

    static func refusal(for error: any Error, host: String) -> ProxyError {
        switch error {
        case let refusal as ProxyError: return refusal
        case let tls as TLSError: return ProxyError.tls(tls, host: host)
        default: return ProxyError(.tlsHandshake, host: host, detail: "upstream closed the connection during the TLS handshake (\(describe(error)))")
        }
    }

    /// The `upstream_handshakes_total` result of a failed attempt: its
    /// refusal's code, mapped without a catch-all.
    static func handshakeResult(_ error: any Error) -> UpstreamHandshakeResult {
        UpstreamHandshakeResult(refusal: refusal(for: error, host: "").code)
    }

    static func describe(_ error: any Error) -> String {
        if let io = error as? IOError { return io.description }
        if let posix = error as? NIOConnectionError { return "\(posix)" }
        return "\(error)"
    }
}

extension TimeAmount {
    var seconds: String {
        let value = Double(nanoseconds) / 1e9
        return value == value.rounded() ? String(Int(value)) : String(value)
    }

    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
