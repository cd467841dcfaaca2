/// `HOST:PORT` as listeners and `upstream:` are written (`127.0.0.1:8080`,
/// `[::1]:9090`, `api.internal:443`). The host stays text: a listener binds
/// it, an upstream resolves it at dial time (where the SSRF guard runs).
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`; an IPv6 host must be bracketed. Listeners may ask
    /// for port 0 (the kernel picks a free one and the log names it).
    public init?(parsing text: String, allowingPortZero: Bool = false) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portPart = rest.dropFirst()
            guard IPAddress.parse(String(hostPart))?.count == 16 else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            // An unbracketed IPv6 address has more colons: ambiguous, refused.
            guard !hostPart.contains(":") else { return nil }
        }
        guard !hostPart.isEmpty, !hostPart.contains(where: { $0 == " " || $0 == "/" }),
              !portPart.isEmpty, portPart.allSatisfy(\.isASCIIDigitChar),
              let port = Int(portPart), ((allowingPortZero ? 0 : 1)...65535).contains(port) else { return nil }
        self.host = String(hostPart)
        self.port = port
    }

    public var description: String {
        "\(Self.bracketed(host)):\(port)"
    }

    /// `host` as an authority writes it: an IPv6 address in brackets (RFC
    /// 3986 §3.2.2); anything else, an address already bracketed included,
    /// as it is. A byte search: with Foundation visible, `contains(":")` is
    /// NSString's substring search, a bridged copy each time (it runs for
    /// every connection's client address).
    public static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) && host.utf8.first != UInt8(ascii: "[") ? "[\(host)]" : host
    }

    static let expectation = "HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)"
}
