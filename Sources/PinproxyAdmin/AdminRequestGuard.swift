import PinproxyPolicy

/// The admin API's guard against DNS rebinding and cross-site requests
/// (docs/contract.md §5). A web page on the operator's machine can make a
/// browser send requests to 127.0.0.1:9090 under its own name (a rebound
/// DNS answer); only the `Host` header shows it. So a request is answered
/// only when its `Host` is:
/// - `localhost` or a name under `.localhost` (they resolve to loopback only);
/// - the listen host itself (its name, or its address);
/// - an IP literal: a loopback one always; any one when the listener is bound
///   to a wildcard address (0.0.0.0, ::), since Prometheus and Kubernetes
///   probes send the address they scrape (a pod IP) and rebinding needs a name;
/// - a name listed in `admin.hosts`;
/// - or absent (HTTP/1.0 tools; no browser omits it).
/// Anything else gets 421. A state-changing request (any method but GET and
/// HEAD) is also refused with 403 when the browser marks it cross-site
/// (`Sec-Fetch-Site` other than `same-origin` or `none`) or when its
/// `Origin` is not the `Host` it was sent to.
/// Pure: the caller passes the headers and the configuration.
struct AdminRequestGuard: Sendable {
    enum Verdict: Equatable, Sendable {
        case allowed
        /// 421: the `Host` is not one the admin API answers to.
        case misdirected(detail: String)
        /// 403: a cross-site state-changing request.
        case forbidden(detail: String)
    }

    /// `admin.listen`'s host as written (a name, an address, or a wildcard).
    let listenHost: String

    func judge(host: String?, origin: String?, fetchSite: String?, stateChanging: Bool, configured: [String]) -> Verdict {
        if let host, !acceptsHost(Self.hostPart(host), configured: configured) {
            return .misdirected(detail: "the admin API does not answer to Host \(host); "
                + "use \(listenHost) or localhost, or add the name to admin.hosts")
        }
        guard stateChanging else { return .allowed }
        if let site = fetchSite?.lowercased(), site != "same-origin", site != "none" {
            return .forbidden(detail: "a \(site) request may not change the admin API's state; send it from a tool, not a web page")
        }
        if let origin {
            let authority = Self.originAuthority(origin)
            guard let authority, let host, authority == host.lowercased() else {
                return .forbidden(detail: "Origin \(origin) is not this admin API (\(host ?? "no Host")); send the request from a tool, not a web page")
            }
        }
        return .allowed
    }

    /// Whether a `Host` name (port removed, lowercased) may be answered.
    func acceptsHost(_ name: String, configured: [String]) -> Bool {
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if configured.contains(name) { return true }
        let listen = Self.hostPart(listenHost)
        if name == listen { return true }
        guard let address = IPAddress.parse(name) else { return false }
        if Self.isLoopback(address) { return true }
        if let bound = IPAddress.parse(listen) {
            // Bound to a wildcard: any address of the machine may be the one scraped.
            return bound.allSatisfy { $0 == 0 } || bound == address
        }
        return false
    }

    /// `HOST[:PORT]` or `[V6][:PORT]` → the host, lowercased, without brackets or a trailing dot.
    static func hostPart(_ authority: String) -> String {
        var text = authority.lowercased()
        if text.hasPrefix("[") {
            if let close = text.firstIndex(of: "]") { text = String(text[text.index(after: text.startIndex)..<close]) }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = String(text[..<colon])
        }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// `http://host:port` → `host:port`, lowercased; nil for `null` or anything opaque.
    static func originAuthority(_ origin: String) -> String? {
        let lower = origin.lowercased()
        for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
            let rest = lower.dropFirst(scheme.count)
            return rest.isEmpty ? nil : String(rest.prefix { $0 != "/" })
        }
        return nil
    }

    static func isLoopback(_ address: [UInt8]) -> Bool {
        if address.count == 4 { return address[0] == 127 }
        return address == [UInt8](repeating: 0, count: 15) + [1]
    }
}
