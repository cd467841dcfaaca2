import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyPolicy

/// What a request's credential established before routing: a principal to
/// admit or not, or a refusal already (407 wrong credential, 429 too many
/// failures). Turned into refusals in one place, for CONNECT and
/// absolute-form alike (docs/contract.md §15).
enum ClientStanding {
    case principal(ClientPrincipal)
    case refused(ProxyError)

    /// Anonymous, address unknown: what a caller that checked nothing gets,
    /// so a forgotten check can only refuse more (require_identity, `clients:`).
    static let unchecked = ClientStanding.principal(ClientPrincipal(address: nil, identity: nil))

    /// The identity proved, for the access line and the `client` label.
    var identity: String? {
        if case .principal(let principal) = self { return principal.identity }
        return nil
    }

    /// Checks `head`'s `Proxy-Authorization` for a client at `address`;
    /// a failed attempt is counted under its identity (or `_unknown`).
    static func of(_ head: HTTPRequestHead, address: [UInt8]?, services: ProxyServices, config: PinproxyConfig) -> ClientStanding {
        let values = head.headers["proxy-authorization"]
        if values.isEmpty { return .principal(ClientPrincipal(address: address, identity: nil)) }
        switch services.authenticator.authenticate(values, address: address, identities: config.identities) {
        case .anonymous:
            return .principal(ClientPrincipal(address: address, identity: nil))
        case .identified(let name):
            return .principal(ClientPrincipal(address: address, identity: name))
        case .rejected(let label, let detail):
            services.instrumentation.proxyAuthFailed(client: label)
            return .refused(ProxyError(.proxyAuthRequired, host: nil, detail: "\(detail); send Proxy-Authorization: Basic with a configured identity"))
        case .rateLimited(let wait):
            var refusal = ProxyError(.proxyAuthRequired, host: nil,
                                     detail: "too many failed proxy logins from this address; try again in \(Self.seconds(wait)) s",
                                     status: .tooManyRequests)
            refusal.retryAfterSeconds = Self.seconds(wait)
            return .refused(refusal)
        }
    }

    /// `of`, off the event loop when it needs PBKDF2 (~50 ms by design):
    /// a cached credential, or none, is answered in place.
    static func resolve(_ head: HTTPRequestHead, address: [UInt8]?, services: ProxyServices, config: PinproxyConfig,
                        on loop: any EventLoop) -> EventLoopFuture<ClientStanding> {
        let values = head.headers["proxy-authorization"]
        if services.authenticator.answersAtOnce(values, address: address, identities: config.identities) {
            return loop.makeSucceededFuture(of(head, address: address, services: services, config: config))
        }
        return NIOThreadPool.singleton.runIfActive(eventLoop: loop) {
            of(head, address: address, services: services, config: config)
        }
    }

    /// Steps 2 and 3 of docs/contract.md §15, before any host decision: a
    /// credential that did not check out (407, or 429), or none where
    /// `clients.require_identity` asks for one (407), is refused whatever the
    /// host, so a client without a valid credential cannot tell denied hosts
    /// from allowed ones by the answer.
    func authenticated(host: String, config: PinproxyConfig) throws {
        switch self {
        case .refused(var refusal):
            refusal.host = host
            throw refusal
        case .principal(let principal):
            if config.requireIdentity, principal.identity == nil {
                throw ProxyError(.proxyAuthRequired, host: host, detail: ClientAdmission.requireIdentityDetail)
            }
        }
    }

    /// Admits the principal to `policy`, or throws the refusal (407 or 403).
    func admit(host: String, policy: HostPolicy?, config: PinproxyConfig) throws {
        switch self {
        case .refused(var refusal):
            refusal.host = host
            throw refusal
        case .principal(let principal):
            var refusal: ProxyError
            switch ClientAdmission.decide(principal, host: host, policy: policy?.spec, config: config) {
            case .admitted: return
            case .credentialRequired(let detail): refusal = ProxyError(.proxyAuthRequired, host: host, detail: detail)
            case .denied(let detail): refusal = ProxyError(.clientDenied, host: host, detail: detail)
            }
            // An anonymous client learns the code and the fix; the rule (policy
            // file, line, the identities it admits) goes to the access line only.
            if principal.identity == nil { refusal.clientDetail = Self.anonymousDetail(refusal.code, host: host) }
            throw refusal
        }
    }

    /// The body of a 407 / 403 `client_denied` for a client that sent no credential.
    static func anonymousDetail(_ code: ProxyError.Code, host: String) -> String {
        switch code {
        case .proxyAuthRequired:
            return "authenticate with Proxy-Authorization: Basic (HTTPS_PROXY=http://NAME:PASSWORD@HOST:PORT)"
        default:
            return "this client may not use the policy for \(host); ask the proxy's operator to admit it (the rule is in pinproxy's log)"
        }
    }

    private static func seconds(_ duration: Duration) -> Int {
        max(1, Int(duration.components.seconds) + (duration.components.attoseconds > 0 ? 1 : 0))
    }
}
