import PinproxyPolicy

/// `host:port`, `[v6]:port` or `host` as found in a CONNECT target, URL or Host header.
struct Authority: Equatable {
    var host: String
    var port: Int?

    init(host: String, port: Int?) {
        self.host = host
        self.port = port
    }

    init?(_ text: String) {
        guard !text.isEmpty else { return nil }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                port = nil
            } else {
                guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()), (1...65535).contains(value) else { return nil }
                port = value
            }
            return
        }
        if let colon = text.lastIndex(of: ":"), !text[..<colon].utf8.contains(UInt8(ascii: ":")) {
            guard let value = Int(text[text.index(after: colon)...]), (1...65535).contains(value) else { return nil }
            host = String(text[..<colon])
            port = value
        } else {
            host = text
            port = nil
        }
        guard !host.isEmpty, Self.isHostText(host) else { return nil }
    }

    /// Letters, digits, `-._:`; ASCII is checked byte by byte (the common
    /// case, and cheaper than Unicode character properties).
    private static func isHostText(_ host: String) -> Bool {
        if host.utf8.allSatisfy({ $0 < 0x80 }) {
            return host.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"):
                    return true
                default:
                    return false
                }
            }
        }
        return host.allSatisfy { $0.isLetter || $0.isNumber || "-._:".contains($0) }
    }

    /// Host names compare without case and without a trailing dot.
    func sameHost(as other: String) -> Bool {
        Self.normalize(host) == Self.normalize(other)
    }

    static func normalize(_ host: String) -> String {
        HostPattern.normalize(host)
    }

    /// The host a request is routed by: normalised, IP literals canonical; a
    /// host that ends in a number but is no IPv4 address is refused (400), as
    /// browsers refuse it.
    static func routingHost(_ host: String) throws -> String {
        let name = normalize(host)
        if case .invalid = IPLiteral.parse(name) {
            throw ProxyError(.badRequest, host: nil, detail: "\"\(host)\" is neither a host name nor an IP address")
        }
        return name
    }
}

/// An absolute-form request target (`http://host[:port]/path?query`).
struct AbsoluteTarget {
    var scheme: String
    var authority: Authority
    /// Origin-form: path and query.
    var originForm: String

    init?(_ uri: String) {
        // Origin-form (every request inside a session) is no URL: known
        // from its first byte, before anything is lowercased.
        guard let first = uri.utf8.first, first != UInt8(ascii: "/"), first != UInt8(ascii: "*") else { return nil }
        // The scheme is in the first 8 bytes: lowercase those only (a short
        // string, made without allocating).
        let lower = String(uri.prefix(8)).lowercased()
        let scheme: String
        let prefix: Int
        // `ws://` and `wss://` (a WebSocket client sending absolute-form) are
        // `http://` and `https://` on the wire (RFC 6455 §3).
        if lower.hasPrefix("http://") { scheme = "http"; prefix = 7 } else if lower.hasPrefix("https://") { scheme = "https"; prefix = 8 }
        else if lower.hasPrefix("ws://") { scheme = "http"; prefix = 5 } else if lower.hasPrefix("wss://") { scheme = "https"; prefix = 6 }
        else { return nil }
        let rest = uri.dropFirst(prefix)
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        guard let authority = Authority(String(rest[..<end])) else { return nil }
        self.scheme = scheme
        self.authority = authority
        let tail = String(rest[end...])
        self.originForm = tail.isEmpty ? "/" : (tail.hasPrefix("?") ? "/" + tail : tail)
    }

    var defaultPort: Int { scheme == "https" ? 443 : 80 }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's optional white space).
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
