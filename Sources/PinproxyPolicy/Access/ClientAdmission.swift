/// Who a request comes from once its credential has been checked: the
/// address it connected from and the configured identity it proved (nil:
/// it sent none).
public struct ClientPrincipal: Sendable, Hashable {
    /// The client's IP address bytes (4 or 16); nil when unknown.
    public var address: [UInt8]?
    /// A name under `clients.identities`, never a name the client merely sent.
    public var identity: String?

    public init(address: [UInt8]?, identity: String?) {
        self.address = address
        self.identity = identity
    }

    public static let metricLabelAnonymous = "_anonymous"

    /// The `client` label of `requests_total` and `denied_total`
    /// (docs/contract.md §6, §15): bounded by the configuration.
    public var metricLabel: String { Self.label(identity) }

    /// The label for an identity name (configured) or nil (anonymous).
    public static func label(_ identity: String?) -> String { identity ?? metricLabelAnonymous }
}

/// Whether a client may use a host's policy (docs/contract.md §15).
public enum AdmissionVerdict: Sendable, Hashable {
    case admitted
    /// 407 `proxy_auth_required`: a credential would change the answer.
    case credentialRequired(detail: String)
    /// 403 `client_denied`, naming the rule.
    case denied(detail: String)
}

/// The admission decision as a pure function of the client, the host's
/// policy and the main file: no I/O, no clock, no password work (the
/// credential was checked before, by `ClientAuthentication`). The proxy calls
/// it on every CONNECT and absolute-form request; `explain HOST --client`
/// calls `explain(client:host:snapshot:)` for the same answer.
public enum ClientAdmission {
    public static func decide(_ client: ClientPrincipal, host: String, policy: HostPolicySpec?, config: PinproxyConfig) -> AdmissionVerdict {
        if let name = client.identity, let identity = config.identities[name], !identity.admitsAddress(client.address) {
            let from = identity.from.map(\.description).joined(separator: ", ")
            return .denied(detail: "identity \(name) may connect only from \(from) (clients.identities.\(name).from); \(addressText(client)) is outside")
        }
        if config.requireIdentity, client.identity == nil {
            return .credentialRequired(detail: requireIdentityDetail)
        }
        guard let policy, let rules = policy.clients else { return .admitted }
        for rule in rules {
            switch rule.kind {
            case .identity(let name) where name == client.identity:
                return .admitted
            case .network(let cidr) where client.address.map(cidr.contains(bytes:)) ?? false:
                return .admitted
            case .identity, .network:
                continue
            }
        }
        let allowed = rules.isEmpty ? "no client" : "only [\(rules.map(\.description).joined(separator: ", "))]"
        let rule = "policy \(policy.match.text) (\(policy.location)) admits \(allowed)"
        let namesIdentities = rules.contains { if case .identity = $0.kind { return true } else { return false } }
        if client.identity == nil, namesIdentities {
            return .credentialRequired(detail: "\(rule); \(addressText(client)) sent no credential: authenticate with Proxy-Authorization: Basic")
        }
        let who = client.identity.map { "identity \($0)" } ?? "anonymous client \(addressText(client))"
        return .denied(detail: "\(rule); \(who) is not among them")
    }

    /// What a client named `NAME` (a configured identity) or `IP` (an
    /// address, anonymous) would be told for `host`: the same decision the
    /// proxy makes, for `pinproxy explain HOST --client NAME|IP`. Nil when
    /// `client` is neither a configured identity nor an address.
    public static func explain(client: String, host: String, snapshot: PolicySnapshot) -> AdmissionVerdict? {
        let principal: ClientPrincipal
        if snapshot.config.identities[client] != nil {
            principal = ClientPrincipal(address: nil, identity: client)
        } else if let address = IPAddress.parse(client) {
            // The listener's ACL comes first: an address outside it never gets as far as a 407.
            if let why = ClientNetworkACL.refusal(address: address, config: snapshot.config) { return .denied(detail: why) }
            principal = ClientPrincipal(address: address, identity: nil)
        } else {
            return nil
        }
        // An identity without an address: its `from:` is not what is asked about.
        var config = snapshot.config
        if let name = principal.identity { config.identities[name]?.from = [] }
        return decide(principal, host: host, policy: snapshot.policy(forHost: host)?.spec, config: config)
    }

    /// The 407's detail when `clients.require_identity` is true and no identity was proved.
    public static let requireIdentityDetail =
        "clients.require_identity is true: authenticate with Proxy-Authorization: Basic (HTTPS_PROXY=http://NAME:PASSWORD@HOST:PORT)"

    private static func addressText(_ client: ClientPrincipal) -> String {
        client.address.map(IPAddress.format) ?? "an unknown address"
    }
}
