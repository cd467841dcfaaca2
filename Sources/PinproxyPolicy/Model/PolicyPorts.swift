/// How a client asked for a host: the port a policy's `ports:` is checked
/// against, and which default applies when the policy has none
/// (docs/contract.md §3).
public enum RequestKind: Sendable, Hashable {
    /// `CONNECT host:port`.
    case connect
    /// `GET http://host:port/path` (or `https://`) through `HTTP_PROXY`.
    case absoluteForm
}

extension HostPolicySpec {
    /// The ports a request of `kind` may ask for: `ports:` when the policy
    /// sets it, else 443 for CONNECT and 80, 443 for absolute-form requests.
    /// An `upstream:` override changes where pinproxy dials, not this: the
    /// port the client asked for is what is checked.
    public func allowedPorts(for kind: RequestKind) -> [Int] {
        if let ports { return ports }
        switch kind {
        case .connect: return HostPolicyDefaults.connectPorts
        case .absoluteForm: return HostPolicyDefaults.absoluteFormPorts
        }
    }

    /// Why a request of `kind` for `host:port` is refused with 403
    /// `port_denied`, or nil when the policy allows that port. A `deny`
    /// policy refuses the host before the port is looked at.
    public func portRefusal(host: String, port: Int, kind: RequestKind) -> String? {
        let allowed = allowedPorts(for: kind)
        guard !allowed.contains(port) else { return nil }
        let list = allowed.map(String.init).joined(separator: ", ")
        let rule: String
        if ports != nil {
            rule = "ports: [\(list)]"
        } else {
            rule = "no `ports:`, so \(kind == .connect ? "CONNECT" : "an http:// request") may reach only \(list)"
        }
        return "policy \(match.text) (\(location)) does not allow port \(port) of \(host) (\(rule)); list \(port) under its `ports:` to allow it"
    }

    /// The ports in words, for `explain`: both defaults when `ports:` is absent.
    public var portsText: String {
        if let ports { return ports.map(String.init).joined(separator: ", ") + " (ports:)" }
        let connect = HostPolicyDefaults.connectPorts.map(String.init).joined(separator: ", ")
        let absolute = HostPolicyDefaults.absoluteFormPorts.map(String.init).joined(separator: ", ")
        return "\(connect) for CONNECT, \(absolute) for http:// requests (the defaults; `ports:` sets both)"
    }
}
