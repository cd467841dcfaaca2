import Logging
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTLS

/// CONNECT on the listener: refused, spliced blindly (`tunnel`), or
/// intercepted. It sits after the `HTTPExchangeHandler`, which hands it a
/// CONNECT's parts; once the head is complete and the answer is written,
/// `SessionInstaller` rebuilds the pipeline once for what comes next.
final class ConnectHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// No CONNECT seen yet.
        case idle
        /// Its `Proxy-Authorization` is being checked off the event loop;
        /// `ended` once the head's end has arrived meanwhile.
        case authenticating(ConnectRequest, ended: Bool)
        /// The CONNECT passed its checks; carried out when its head is complete.
        case accepted(ConnectRequest)
        /// Dialling the tunnel's upstream.
        case dialling(ConnectRequest)
        /// "200 Connection established" is being written.
        case establishing(ConnectRequest)
        /// Answered; the new layers are in place (or the connection closed).
        case done
    }

    struct ConnectRequest {
        var head: HTTPRequestHead
        var host: String
        var port: Int
        var policy: HostPolicy?
        var intercept: Bool
        var started: NIODeadline
        var upstreamAddress: String?
        /// The identity `Proxy-Authorization` proved (docs/contract.md §15).
        var identity: String?
    }

    let services: ProxyServices
    let clientAddress: String
    let headTimer: RequestHeadTimer
    let limits: PinproxyConfig.Limits
    /// The listener's HTTP layers (`ListenerPipeline`), which an answered
    /// CONNECT takes out. They hold this handler, so it lets them go when it
    /// leaves the pipeline (`handlerRemoved`): kept, the pair would keep each
    /// other, and every layer with them, after the connection closed.
    var listenerLayers: PipelineLayers?
    private var state: State = .idle

    init(services: ProxyServices, clientAddress: String, headTimer: RequestHeadTimer, limits: PinproxyConfig.Limits) {
        self.services = services
        self.clientAddress = clientAddress
        self.headTimer = headTimer
        self.limits = limits
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (state, unwrapInboundIn(data)) {
        case (.idle, .head(let head)):
            headTimer.headComplete()
            authenticate(head, context: context)
        case (.authenticating(let request, _), .end):
            state = .authenticating(request, ended: true)
        case (.accepted(let request), .end):
            carryOut(request, context: context)
        case (.idle, _), (.authenticating, _), (.accepted, _), (.dialling, _), (.establishing, _), (.done, _):
            break  // a CONNECT's body, or parts after a refusal: nothing to do
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        listenerLayers = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .authenticating(let request, _), .accepted(let request), .dialling(let request), .establishing(let request):
            // The app left before its answer: one line, status 499.
            state = .done
            logAccess(request, status: 499, error: nil, mode: request.intercept ? .intercept : .tunnel)
        case .idle, .done:
            break
        }
        context.fireChannelInactive()
    }

    // MARK: Deciding

    /// Who the client is first (docs/contract.md §15); PBKDF2 runs on a thread
    /// pool when the credential is not cached, and the decision continues here.
    private func authenticate(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let request = ConnectRequest(head: head, host: "", port: 443, policy: nil, intercept: false, started: .now())
        state = .authenticating(request, ended: false)
        ClientStanding.resolve(head, address: context.channel.remoteAddress?.addressBytes, services: services,
                               config: services.store.snapshot.config, on: context.eventLoop)
            .assumeIsolated().whenComplete { result in
                guard case .authenticating(let request, let ended) = self.state else { return }  // the app left (logged then)
                let client: ClientStanding
                switch result {
                case .success(let standing): client = standing
                case .failure(let error):
                    client = .refused(ProxyError(.badRequest, host: nil, detail: "could not check the credential: \(error)"))
                }
                self.decide(request, client: client, context: context)
                if ended, case .accepted(let accepted) = self.state { self.carryOut(accepted, context: context) }
            }
    }

    private func decide(_ request: ConnectRequest, client: ClientStanding, context: ChannelHandlerContext) {
        var request = request
        let head = request.head
        do {
            guard let authority = Authority(head.uri) else {
                throw ProxyError(.badRequest, host: nil, detail: "CONNECT target \"\(head.uri)\" is not host:port")
            }
            request.host = try Authority.routingHost(authority.host)
            request.port = authority.port ?? 443
            request.identity = client.identity
            let decision = ConnectDecision(host: request.host, port: request.port, client: client, snapshot: services.store.snapshot)
            request.policy = decision.policy
            if let refusal = decision.refusal { throw refusal }
            request.intercept = decision.intercept
            state = .accepted(request)
        } catch let refusal as ProxyError {
            refuse(request, refusal, context: context)
        } catch {
            refuse(request, ProxyError(.badRequest, host: nil, detail: "\(error)"), context: context)
        }
    }

    private func carryOut(_ request: ConnectRequest, context: ChannelHandlerContext) {
        guard request.intercept, let policy = request.policy else {
            dialTunnel(request, context: context)
            return
        }
        establish(request, context: context) {
            try SessionInstaller.intercept(
                context: context, host: request.host, port: request.port, policy: policy, services: self.services,
                clientAddress: self.clientAddress, headTimer: self.headTimer, listenerLayers: try self.layers(),
                limits: self.limits, identity: request.identity)
        }
    }

    /// The SSRF guard runs in the dial, before the 200: a refused tunnel gets its 403.
    private func dialTunnel(_ request: ConnectRequest, context: ChannelHandlerContext) {
        state = .dialling(request)
        let plan = DialPlan(host: request.host, port: request.port, tls: false, policy: request.policy)
        services.connector.dial(plan, on: context.eventLoop) { _ in }.assumeIsolated().whenComplete { result in
            guard case .dialling(var request) = self.state else {
                // The app left during the dial: its line was written then (499).
                if case .success(let upstream) = result { upstream.close(promise: nil) }
                return
            }
            switch result {
            case .failure(let error):
                self.refuse(request, UpstreamConnector.refusal(for: error, host: request.host), context: context)
            case .success(let upstream):
                request.upstreamAddress = upstream.remoteAddress?.hostPort
                self.establish(request, context: context, onFailure: { upstream.close(promise: nil) }) {
                    try SessionInstaller.tunnel(context: context, to: upstream, services: self.services, host: request.host,
                                                policy: request.policy, clientAddress: self.clientAddress,
                                                listenerLayers: try self.layers()) { up, down in
                        self.logAccess(request, status: 200, error: nil, mode: .tunnel, bytesUp: up, bytesDown: down)
                    }
                }
            }
        }
    }

    /// The listener's layers, which the CONNECT's answer takes out.
    private func layers() throws -> PipelineLayers {
        guard let listenerLayers else { throw ProxyError(.badRequest, host: nil, detail: "CONNECT on a connection not built by ListenerPipeline") }
        return listenerLayers
    }

    /// "200 Connection established", then the new layers once it is written.
    private func establish(_ request: ConnectRequest, context: ChannelHandlerContext, onFailure: @escaping () -> Void = {},
                           install: @escaping () throws -> Void) {
        state = .establishing(request)
        var headers = HTTPHeaders()
        headers.add(name: "Via", value: Via.value)
        let head = HTTPResponseHead(version: .http1_1, status: .custom(code: 200, reasonPhrase: "Connection established"), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { result in
            guard case .establishing = self.state else {
                onFailure()  // the app left meanwhile (already logged)
                return
            }
            self.state = .done
            guard case .success = result, context.channel.isActive else {
                onFailure()
                return
            }
            do {
                // An intercepted session's requests have lines of their own; a
                // tunnel's line is written when it closes.
                try install()
            } catch {
                self.services.logger.error("could not set up the CONNECT session", metadata: ["host": "\(request.host)", "error": "\(error)"])
                onFailure()
                context.close(promise: nil)
            }
        }
    }

    // MARK: Refusing

    /// NIO's encoder drops the body of any response to CONNECT; a refusal must
    /// still carry its JSON, so it goes out as bytes below the encoder, and the
    /// connection closes. The line is logged before the write (one line even
    /// when the write completes at once and closes the channel).
    private func refuse(_ request: ConnectRequest, _ error: ProxyError, context: ChannelHandlerContext) {
        state = .done
        services.instrumentation.denied(code: error.code, client: ClientPrincipal.label(request.identity))
        logAccess(request, status: Int(error.status.code), error: error, mode: .connect, host: request.host.isEmpty ? error.host : request.host)
        RefusalBody.writeRaw(error, context: context)
    }

    private func logAccess(_ request: ConnectRequest, status: Int, error: ProxyError?, mode: AccessMode,
                           host: String? = nil, bytesUp: Int = 0, bytesDown: Int = 0) {
        let seconds = Double((NIODeadline.now() - request.started).nanoseconds) / 1e9
        services.recordAccess(AccessRecord(
            client: clientAddress, method: "CONNECT", host: (host ?? request.host).isEmpty ? "-" : (host ?? request.host),
            path: request.head.uri, status: status, bytesUp: bytesUp, bytesDown: bytesDown, seconds: seconds,
            policy: request.policy?.metricLabel ?? "_none", pin: nil, upstream: request.upstreamAddress,
            error: error?.code.rawValue, mode: mode, identity: request.identity, detail: error?.withheldDetail
        ), policy: request.policy)
    }
}
