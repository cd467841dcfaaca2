import NIOHTTP1
import PinproxyPolicy

/// The HTTP/1.1 rules a proxy owes (RFC 9110 §7.6, RFC 9112 §6): what is
/// refused as ambiguous framing, which headers are hop-by-hop, `Via`.
enum MessageRules {
    /// Headers that describe one connection, never forwarded.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "upgrade",
    ]

    /// Request shapes that let two parsers disagree on where a message ends
    /// (request smuggling): refused with 400 before anything goes upstream.
    static func framingProblem(_ head: HTTPRequestHead) -> String? {
        let lengths = head.headers[canonicalForm: "content-length"]
        let encodings = head.headers[canonicalForm: "transfer-encoding"].map { $0.lowercased() }
        if !lengths.isEmpty && !encodings.isEmpty {
            return "both Content-Length and Transfer-Encoding are present"
        }
        if lengths.count > 1 || head.headers["content-length"].count > 1 {
            return "more than one Content-Length"
        }
        if let length = lengths.first, UInt64(length) == nil {
            return "Content-Length \"\(length)\" is not a number"
        }
        if !encodings.isEmpty && encodings != ["chunked"] {
            return "Transfer-Encoding must be exactly \"chunked\", not \"\(encodings.joined(separator: ", "))\""
        }
        return nil
    }

    /// Removes hop-by-hop headers, and those the Connection header names.
    static func stripHopByHop(_ headers: inout HTTPHeaders) {
        // One pass to find what must go; most heads carry only `Connection:
        // keep-alive`, so this usually removes one name.
        let named = headers[canonicalForm: "connection"].map { $0.lowercased() }
        var doomed: [String] = []
        for (name, _) in headers {
            let lower = name.lowercased()
            if lower != "transfer-encoding" && (hopByHop.contains(lower) || named.contains(lower)) && !doomed.contains(lower) {
                doomed.append(lower)
            }
        }
        for name in doomed {
            headers.remove(name: name)
        }
    }

    /// Whether the client asked to close after this exchange.
    static func wantsClose(_ head: HTTPRequestHead) -> Bool {
        !head.isKeepAlive
    }

    /// The head sent upstream: origin-form target, hop-by-hop removed, the
    /// policy's header rules applied, `Via` added. The Host header stays.
    static func upstreamHead(from head: HTTPRequestHead, target: String, hostHeader: String, rules: HeaderRules?) -> HTTPRequestHead {
        var headers = head.headers
        stripHopByHop(&headers)
        if headers["host"].isEmpty { headers.add(name: "Host", value: hostHeader) }
        if let rules {
            for name in rules.remove { headers.remove(name: name) }
            for field in rules.set { headers.replaceOrAdd(name: field.name, value: field.value) }
        }
        headers.add(name: "Via", value: head.version.major == 1 && head.version.minor == 0 ? "1.0 pinproxy" : Via.value)
        return HTTPRequestHead(version: .http1_1, method: head.method, uri: target, headers: headers)
    }

    /// The head sent back to the client: hop-by-hop removed, `Via` added.
    static func clientHead(from head: HTTPResponseHead, closing: Bool) -> HTTPResponseHead {
        var headers = head.headers
        stripHopByHop(&headers)
        headers.add(name: "Via", value: Via.value)
        if closing { headers.replaceOrAdd(name: "Connection", value: "close") }
        return HTTPResponseHead(version: .http1_1, status: head.status, headers: headers)
    }

    /// A response that said it would close its connection cannot be pooled.
    static func upstreamKeepsAlive(_ head: HTTPResponseHead) -> Bool {
        head.isKeepAlive
    }
}

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
        var h = host.lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        return h
    }
}

/// An absolute-form request target (`http://host[:port]/path?query`).
struct AbsoluteTarget {
    var scheme: String
    var authority: Authority
    /// Origin-form: path and query.
    var originForm: String

    init?(_ uri: String) {
        let lower = uri.lowercased()
        let scheme: String
        if lower.hasPrefix("http://") { scheme = "http" } else if lower.hasPrefix("https://") { scheme = "https" } else { return nil }
        let rest = uri.dropFirst(scheme.count + 3)
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        guard let authority = Authority(String(rest[..<end])) else { return nil }
        self.scheme = scheme
        self.authority = authority
        let tail = String(rest[end...])
        self.originForm = tail.isEmpty ? "/" : (tail.hasPrefix("?") ? "/" + tail : tail)
    }

    var defaultPort: Int { scheme == "https" ? 443 : 80 }
}
