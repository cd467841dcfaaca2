import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO
import PinproxyPolicy

/// Where a request goes and in what shape: the upstream it is dialled to and
/// the head sent there. Decided once per request, before anything moves.
/// The exchange machine's states that need it carry it (acquiring to
/// forwarding); a class for the reason `Exchange` is one: it moves from
/// state to state, and one reference is cheaper to move than its fields.
final class Route {
    var plan: DialPlan
    /// The head for the upstream: origin-form, hop-by-hop removed, the
    /// policy's header rules applied, framing decided by pinproxy; whole,
    /// or the app's bytes with those edits (`UpstreamRequestHead`).
    var upstreamHead: UpstreamRequestHead
    /// How the request body is delimited (decided from the app's head).
    var framing: RequestFraming
    var responseTimeout: TimeAmount
    /// A WebSocket upgrade the policy allows: its `101` becomes a splice.
    var webSocket = false

    init(plan: DialPlan, upstreamHead: UpstreamRequestHead, framing: RequestFraming, responseTimeout: TimeAmount) {
        self.plan = plan
        self.upstreamHead = upstreamHead
        self.framing = framing
        self.responseTimeout = responseTimeout
    }
}

/// What routing made of a request head: the host and policy it concerns
/// (for the access line, even when refused) and the route or the refusal.
struct RoutingDecision {
    var host: String
    var policy: HostPolicy?
    var result: Result<Route, ProxyError>
    /// The refusal must end the connection (ambiguous framing, a duplicate Host).
    var closeAfter = false
    /// How the request's body is delimited, once decided: a refused request's
    /// body is still read (or the connection closed) by it.
    var framing: RequestFraming?
    /// The identity the request proved (docs/contract.md §15): the CONNECT's
    /// inside an intercepted session; nil for an anonymous client.
    var identity: String?
}

/// The pure part of the request path: a request head and the policies in
/// force in, a `RoutingDecision` out. No I/O, no clock.
enum RequestRouter {
    /// The intercepted session a request arrived in, if any: fixed when the
    /// session is installed. A class, because every request and HTTP/2
    /// stream of the session holds it, and each copy of a struct retained
    /// its five references (issue 33).
    final class Interception: Sendable {
        let host: String
        let port: Int
        let policy: HostPolicy
        /// The identity the CONNECT proved; it applies to every request inside.
        let identity: String?
        /// Opened by the transparent listener (the access line's mode says so).
        let transparent: Bool
        /// What this session's requests proved already (one per session,
        /// shared by its HTTP/2 streams).
        let routes = SessionRouteCache()
        /// The room its ended HTTP/2 upstream streams keep for its next
        /// requests (one per session, shared by its HTTP/2 streams).
        let streamRoom = SessionStreamRoom()
        /// Where the session's requests go: its CONNECT's host and port under
        /// its policy, the same for every request, so made once (each plan
        /// made anew was an array of targets per request, issue 33).
        let plan: DialPlan

        init(host: String, port: Int, policy: HostPolicy, identity: String? = nil, transparent: Bool = false) {
            self.host = host
            self.port = port
            self.policy = policy
            self.identity = identity
            self.transparent = transparent
            plan = DialPlan(host: host, port: port, tls: true, policy: policy)
        }
    }

    /// `client` is what the request's credential established (absolute-form
    /// requests are admitted here, after the policy lookup); inside an
    /// intercepted session the CONNECT was admitted and `interception`
    /// carries its identity. `snapshot` is read only for an absolute-form
    /// request: a session's policy was fixed by its CONNECT, and reading the
    /// store takes its lock and a retain for every request (issue 33).
    ///
    /// The common request inside a session, an HTTP/1.1 head kept as its
    /// bytes or an HTTP/2 head kept as its block, is routed on them
    /// (`routeForwarded`, `routeBlock`); any other head is made whole and
    /// routed as NIO's, so that every refusal is made here.
    static func route(_ head: AppRequestHead, interception: Interception?, snapshot: @autoclosure () -> PolicySnapshot, maxHeadBytes: Int,
                      client: ClientStanding = .unchecked) -> RoutingDecision {
        if let interception {
            switch head {
            case .bytes(let bytes):
                if let decision = routeForwarded(bytes, in: interception, maxHeadBytes: maxHeadBytes) { return decision }
            case .block(let block):
                if let decision = routeBlock(block, in: interception, maxHeadBytes: maxHeadBytes) { return decision }
            case .whole:
                break
            }
        }
        return route(head.whole, interception: interception, snapshot: snapshot(), maxHeadBytes: maxHeadBytes, client: client)
    }

    static func route(_ head: HTTPRequestHead, interception: Interception?, snapshot: @autoclosure () -> PolicySnapshot, maxHeadBytes: Int,
                      client: ClientStanding = .unchecked) -> RoutingDecision {
        var decision = RoutingDecision(host: interception?.host ?? "", policy: interception?.policy,
                                       result: .failure(ProxyError(.badRequest, host: nil, detail: "unrouted")),
                                       identity: interception?.identity ?? client.identity)
        do {
            // The decoder's limit counts names and values only; the whole head counts.
            if MessageRules.wireSize(head) > maxHeadBytes {
                decision.closeAfter = true
                throw UnreadableRequest.headTooLarge(limit: maxHeadBytes)
            }
            let framing: RequestFraming
            switch RequestFraming.of(head) {
            case .success(let decided):
                framing = decided
                decision.framing = decided
            case .failure(let problem):
                decision.closeAfter = true
                throw ProxyError(.badRequest, host: nil, detail: "ambiguous message framing: \(problem.message)")
            }
            // The decoder reads nothing after an upgrade request: spliced or closed.
            if MessageRules.asksUpgrade(head) { decision.closeAfter = true }
            let route: Route
            if let interception {
                route = try routeIntercepted(head, in: interception, framing: framing, closeAfter: &decision.closeAfter)
            } else {
                route = try routeAbsoluteForm(head, snapshot: snapshot(), framing: framing, client: client, decision: &decision)
            }
            if MessageRules.asksWebSocket(head) {
                try checkWebSocket(host: decision.host, policy: decision.policy)
                route.webSocket = true
                // An upgrade exists only in HTTP/1.1: never a stream of an h2 connection.
                route.plan = route.plan.requiringHTTP1()
                // Put back after the policy's header rules, so they cannot unmake the handshake.
                MessageRules.addUpgradeFields(&route.upstreamHead, protocol: "websocket")
            }
            decision.result = .success(route)
        } catch let refusal as ProxyError {
            decision.result = .failure(refusal)
        } catch {
            decision.result = .failure(ProxyError(.badRequest, host: nil, detail: "\(error)"))
        }
        return decision
    }

    /// `GET http://host/path` through `HTTP_PROXY`.
    private static func routeAbsoluteForm(_ head: HTTPRequestHead, snapshot: PolicySnapshot, framing: RequestFraming,
                                          client: ClientStanding, decision: inout RoutingDecision) throws -> Route {
        guard let target = AbsoluteTarget(head.uri) else {
            throw ProxyError(.badRequest, host: nil, detail: "pinproxy is a forward proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port")
        }
        let host = try Authority.routingHost(target.authority.host)
        let port = target.authority.port ?? target.defaultPort
        decision.host = host
        let policy = snapshot.policy(forHost: host)
        decision.policy = policy
        // The credential before the host (docs/contract.md §15): a 407 whatever the host.
        try client.authenticated(host: host, config: snapshot.config)
        try checkAllowed(host: host, port: port, kind: .absoluteForm, policy: policy, snapshot: snapshot)
        // A client the policy does not admit never reaches the upstream (nor its token).
        try client.admit(host: host, policy: policy, config: snapshot.config)
        let tls = target.scheme == "https" || (policy?.spec.upgradeToTLS ?? false)
        if tls && policy == nil {
            throw ProxyError(.badRequest, host: host, detail: "no policy covers \(host): send https requests through CONNECT")
        }
        // Upgraded to TLS, the default port is HTTPS's.
        let upstreamPort = (tls && target.scheme == "http" && target.authority.port == nil) ? 443 : port
        let hostHeader = target.authority.port.map { "\(target.authority.host):\($0)" } ?? target.authority.host
        var request = head
        request.headers.replaceOrAdd(name: "Host", value: hostHeader)
        return Route(
            plan: DialPlan(host: host, port: upstreamPort, tls: tls, policy: policy),
            upstreamHead: .whole(MessageRules.upstreamHead(from: request, target: target.originForm, hostHeader: hostHeader,
                                                           rules: policy?.spec.headers, framing: framing)),
            framing: framing,
            responseTimeout: TimeAmount(policy?.spec.responseTimeout ?? HostPolicyDefaults.responseTimeout))
    }

    /// A request inside an intercepted session: its Host (and an absolute
    /// target's authority) must be the CONNECT host, else 421.
    private static func routeIntercepted(_ head: HTTPRequestHead, in interception: Interception, framing: RequestFraming,
                                         closeAfter: inout Bool) throws -> Route {
        if head.method == .CONNECT {
            throw ProxyError(.badRequest, host: interception.host, detail: "CONNECT inside an intercepted session")
        }
        var originForm = head.uri
        var authorities: [Authority] = []
        if let target = AbsoluteTarget(head.uri) {
            authorities.append(target.authority)
            originForm = target.originForm
        }
        let (hostCount, firstHost) = MessageRules.hostFields(head.headers)
        guard hostCount == 1, let hostValue = firstHost else {
            closeAfter = closeAfter || hostCount > 1
            throw ProxyError(.badRequest, host: interception.host,
                             detail: hostCount == 0 ? "the request has no Host header" : "the request has \(hostCount) Host headers")
        }
        try acceptHost(hostValue, beside: authorities, in: interception)
        guard originForm.hasPrefix("/") || originForm == "*" else {
            throw ProxyError(.badRequest, host: interception.host, detail: "request target \"\(head.uri)\" is not origin-form")
        }
        let spec = interception.policy.spec
        return Route(
            plan: interception.plan,
            upstreamHead: .whole(MessageRules.upstreamHead(from: head, target: originForm, hostHeader: hostValue, rules: spec.headers,
                                                           framing: framing)),
            framing: framing,
            responseTimeout: TimeAmount(spec.responseTimeout))
    }

    /// The request's one Host value (and an absolute target's authority,
    /// `authorities`) must name the session's CONNECT host and port (else
    /// 421). The session's host and port never change (a reload leaves an
    /// open session its policy, docs/contract.md §3), so a Host value
    /// accepted once is accepted again: the common request skips the parse.
    private static func acceptHost(_ hostValue: String, beside authorities: [Authority], in interception: Interception) throws {
        if authorities.isEmpty && interception.routes.acceptedHost(hostValue) { return }
        guard let hostHeader = Authority(hostValue) else {
            throw ProxyError(.badRequest, host: interception.host, detail: "the request has 1 Host headers")
        }
        for authority in authorities + [hostHeader] {
            let portMatches = authority.port == nil ? interception.port == 443 : authority.port == interception.port
            // The CONNECT host is normalised already; only the request's side needs it.
            guard Authority.normalize(authority.host) == interception.host && portMatches else {
                throw ProxyError(.hostMismatch, host: interception.host,
                                 detail: "this session was opened with CONNECT \(interception.host):\(interception.port); Host \(hostValue) belongs elsewhere")
            }
        }
        interception.routes.accept(hostValue)
    }

    /// The common request inside an intercepted session, routed on the
    /// bytes the head path read, with no `HTTPHeaders` made: not CONNECT, an
    /// origin-form target, one Host naming the session's host, no `Upgrade`
    /// field, framing that is not refused, field values of ASCII only (a
    /// whole head holds its values as UTF-8 strings, and the bytes sent must
    /// be those it would send). Its head goes up as those bytes edited
    /// (`MessageRules.forwardedHead`). Nil for any other request, and for one
    /// that a check would refuse: `route` makes it whole and routes it as
    /// before, where the refusal is made (`ForwardedRequestTests` routes the
    /// same heads both ways).
    private static func routeForwarded(_ head: RequestHeadBytes, in interception: Interception, maxHeadBytes: Int) -> RoutingDecision? {
        guard let shape = head.bytes.withUnsafeReadableBytes({ bytes in ForwardedShape(head.parsed, in: bytes) }),
              shape.wireSize <= maxHeadBytes,
              case .success(let framing) = RequestFraming.of(head),
              (try? acceptHost(shape.hostValue, beside: [], in: interception)) != nil else { return nil }
        let rules = interception.policy.spec.headers
        return forwarded(.forwarded(MessageRules.forwardedHead(from: head, hostHeader: shape.hostValue, rules: rules, framing: framing)),
                         framing: framing, in: interception)
    }

    /// The common HTTP/2 request inside a session, routed on its header
    /// block, with no head made whole: not CONNECT, `:path` in origin form
    /// (or `*`), one Host (`:authority`, or its one `host` field) naming the
    /// session's host, no `Connection` or `Upgrade` field (HTTP/2 forbids
    /// them; a stream fed without NIO's validation may carry them), framing
    /// that is not refused. Its head goes up as that block edited
    /// (`MessageRules.forwardedBlock`). Nil for any other request, and for
    /// one that a check would refuse: `route` makes it whole and routes it
    /// as before, where the refusal is made (`ForwardedRequestBlockTests`
    /// routes the same blocks both ways).
    private static func routeBlock(_ head: AppRequestBlock, in interception: Interception, maxHeadBytes: Int) -> RoutingDecision? {
        guard head.method != .CONNECT, head.path.utf8.first == UInt8(ascii: "/") || head.path == "*",
              let shape = BlockShape(head), shape.wireSize <= maxHeadBytes,
              case .success(let framing) = RequestFraming.of(head),
              (try? acceptHost(shape.hostValue, beside: [], in: interception)) != nil else { return nil }
        let rules = interception.policy.spec.headers
        return forwarded(.block(MessageRules.forwardedBlock(from: head, hostHeader: shape.hostValue, rules: rules, framing: framing)),
                         framing: framing, in: interception)
    }

    /// What `routeBlock` reads off an HTTP/2 head's fields (the whole head's,
    /// `AppRequestBlock.forEachField`) in one pass: its size on the wire as
    /// `MessageRules.wireSize` counts the whole head, and its one Host value.
    /// Nil: several Hosts or none, or a `Connection` or `Upgrade` field.
    private struct BlockShape {
        var wireSize: Int
        var hostValue: String

        init?(_ head: AppRequestBlock) {
            var size = head.method.rawValue.utf8.count + head.path.utf8.count + 12
            var host: String?
            var hosts = 0
            var plain = true
            head.forEachField { name, value, _ in
                size += name.utf8.count + value.utf8.count + 4
                switch name.utf8.count {
                case 4 where MessageRules.asciiEqualsIgnoringCase(name, "host"):
                    hosts += 1
                    host = value
                case 7 where MessageRules.asciiEqualsIgnoringCase(name, "upgrade"),
                     10 where MessageRules.asciiEqualsIgnoringCase(name, "connection"):
                    plain = false
                default:
                    break
                }
            }
            guard plain, hosts == 1, let host else { return nil }
            wireSize = size + 2
            hostValue = host
        }
    }

    /// The decision for a request inside `interception` routed on the
    /// app's own head (its bytes, its block), going up as `upstreamHead`.
    /// `upstreamHead` is consumed: the route takes it as it is, where a
    /// borrowed head was copied into the route (its field lists retained).
    private static func forwarded(_ upstreamHead: consuming UpstreamRequestHead, framing: RequestFraming, in interception: Interception) -> RoutingDecision {
        let route = Route(plan: interception.plan, upstreamHead: upstreamHead, framing: framing,
                          responseTimeout: TimeAmount(interception.policy.spec.responseTimeout))
        return RoutingDecision(host: interception.host, policy: interception.policy, result: .success(route), framing: framing,
                               identity: interception.identity)
    }

    /// What `routeForwarded` reads off a head's bytes in one pass: whether
    /// it has the common shape, its size on the wire as `MessageRules.wireSize`
    /// counts it, and its one Host value. Nil: not the common shape.
    private struct ForwardedShape {
        var wireSize: Int
        var hostValue: String

        init?(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer) {
            let method = head.method.bytes(in: bytes)
            guard head.target.count > 0, bytes[head.target.start] == UInt8(ascii: "/"),
                  !FieldNames.equal(method, "connect") else { return nil }
            var size = method.count + head.target.count + 12
            var host: ByteSpan?
            for field in head.fields {
                let name = field.name.bytes(in: bytes)
                let value = field.value.bytes(in: bytes)
                guard value.allSatisfy({ $0 < 0x80 }) else { return nil }
                switch name.count {
                case 4 where FieldNames.equal(name, "host"):
                    guard host == nil else { return nil }
                    host = field.value
                case 7 where FieldNames.equal(name, "upgrade"):
                    return nil
                default:
                    break
                }
                size += name.count + value.count + 4
            }
            guard let host else { return nil }
            wireSize = size + 2
            hostValue = host.text(in: bytes)
        }
    }

    /// `websocket: deny` refuses the upgrade (403 `upgrade_denied`, docs/contract.md §11).
    private static func checkWebSocket(host: String, policy: HostPolicy?) throws {
        guard let policy, policy.spec.websocket == .deny else { return }
        throw ProxyError(.upgradeDenied, host: host,
                         detail: "policy \(policy.metricLabel) (\(policy.spec.file)) does not allow WebSocket upgrades to \(host) (websocket: deny)")
    }

    /// Deny by policy or by default, then the policy's `ports:`: the checks
    /// that need no upstream. A host no policy covers under `default_action:
    /// tunnel` has no `ports:` to check (docs/contract.md §3).
    static func checkAllowed(host: String, port: Int, kind: RequestKind, policy: HostPolicy?, snapshot: PolicySnapshot) throws {
        if let policy {
            if policy.spec.action == .deny {
                throw ProxyError(.hostDenied, host: host, detail: "policy \(policy.metricLabel) (\(policy.spec.file)) denies \(host)")
            }
            if let refusal = policy.spec.portRefusal(host: host, port: port, kind: kind) {
                throw ProxyError(.portDenied, host: host, detail: refusal)
            }
        } else if snapshot.defaultAction == .deny {
            throw ProxyError(.hostDenied, host: host, detail: "no policy matches \(host) and default_action is deny")
        }
    }
}
