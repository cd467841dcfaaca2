import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS

/// A refusal, with the contract's code (docs/contract.md §4): the status, the
/// `X-Pinproxy-Error` header and the JSON body are all derived from it.
public struct ProxyError: Error, Sendable, CustomStringConvertible {
    /// The contract's refusal codes (docs/contract.md §4), shared with the metrics' `reason` label.
    public typealias Code = RefusalCode

    public var code: Code
    /// Overrides the code's status (431 for an oversize head is `bad_request`).
    public var status: HTTPResponseStatus
    public var host: String?
    public var detail: String
    /// `Retry-After` on the answer (a rate-limited login).
    public var retryAfterSeconds: Int?
    /// What the body says in place of `detail`, for a client that has not
    /// authenticated (docs/contract.md §4): the code's fix, never a policy
    /// file, a rule or an identity name. `detail` then goes to the log only.
    public var clientDetail: String?

    /// The detail the body withheld (for the access line), if any.
    public var withheldDetail: String? { clientDetail == nil ? nil : detail }

    public init(_ code: Code, host: String?, detail: String, status: HTTPResponseStatus? = nil) {
        self.code = code
        self.status = status ?? code.status
        self.host = host
        self.detail = detail
    }

    public var description: String { "\(code.rawValue): \(detail)" }

    /// The refusal for a failed upstream TLS handshake.
    static func tls(_ error: TLSError, host: String) -> ProxyError {
        let code: Code
        switch error.kind {
        case .verifyFailed: code = .verifyFailed
        case .tlsVersion: code = .tlsVersion
        case .tlsCipher: code = .tlsCipher
        case .tlsHandshake, .configuration: code = .tlsHandshake
        }
        return ProxyError(code, host: host, detail: "upstream TLS: \(error.reason)")
    }
}

/// The JSON body of a refusal: `{"error", "host", "detail"}`.
enum RefusalBody {
    static func json(_ error: ProxyError) -> String {
        let host = error.host.map { "\"\(escape($0))\"" } ?? "null"
        let detail = error.clientDetail ?? error.detail
        return "{\"error\": \"\(error.code.rawValue)\", \"host\": \(host), \"detail\": \"\(escape(detail))\"}\n"
    }

    static func head(_ error: ProxyError, bodyLength: Int, close: Bool) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(bodyLength))
        headers.add(name: "X-Pinproxy-Error", value: error.code.rawValue)
        headers.add(name: "Via", value: Via.value)
        if error.status == .proxyAuthenticationRequired {
            // RFC 9110 §11.7.1: a 407 names the scheme a client should retry with.
            headers.add(name: "Proxy-Authenticate", value: "Basic realm=\"pinproxy\"")
        }
        if let retryAfter = error.retryAfterSeconds { headers.add(name: "Retry-After", value: String(retryAfter)) }
        if close { headers.add(name: "Connection", value: "close") }
        return HTTPResponseHead(version: .http1_1, status: error.status, headers: headers)
    }

    /// The whole response as bytes, for answering before any HTTP handler exists.
    static func raw(_ error: ProxyError) -> String {
        let body = json(error)
        let head = head(error, bodyLength: body.utf8.count, close: true)
        var text = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for (name, value) in head.headers { text += "\(name): \(value)\r\n" }
        return text + "\r\n" + body
    }

    /// Writes the whole refusal as bytes below the HTTP writer, then closes
    /// (a response to CONNECT keeps its body only this way).
    static func writeRaw(_ error: ProxyError, context: ChannelHandlerContext) {
        let bytes = ByteBuffer(string: raw(error))
        guard let encoder = try? context.pipeline.syncOperations.context(handlerType: ResponseWriter.self) else {
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        encoder.writeAndFlush(NIOAny(bytes)).assumeIsolated().whenComplete { _ in
            LingeringClose.close(channel)
        }
    }

    static func escape(_ text: String) -> String {
        JSONString.escape(text)
    }
}

enum Via {
    /// pinproxy's own answers (refusals, CONNECT), always HTTP/1.1-shaped.
    static let value = "1.1 pinproxy"

    /// For a forwarded message: the protocol pinproxy received it in
    /// (RFC 9110 §7.6.3), so an upstream sees "2" for an app speaking
    /// HTTP/2 and an app sees the upstream's version.
    static func value(receivedIn version: HTTPVersion) -> String {
        switch (version.major, version.minor) {
        case (2, _): return "2 pinproxy"
        case (1, 0): return "1.0 pinproxy"
        default: return value
        }
    }

    /// The same for an HTTP/1 message forwarded as its bytes.
    static func wireValue(receivedIn version: HTTPVersion) -> StaticString {
        version.minor == 0 ? "1.0 pinproxy" : "1.1 pinproxy"
    }
}

extension RefusalCode {
    /// The status a client sees for this code.
    public var status: HTTPResponseStatus {
        switch self {
        case .clientDenied, .hostDenied, .portDenied, .ssrfBlocked, .upgradeDenied: return .forbidden
        case .pinMismatch, .pinsExpired, .verifyFailed, .tlsVersion, .tlsCipher, .tlsHandshake, .connectFailed: return .badGateway
        case .upstreamTimeout: return .gatewayTimeout
        case .queueTimeout, .tokenUnavailable: return .serviceUnavailable
        case .badRequest: return .badRequest
        case .proxyAuthRequired: return .proxyAuthenticationRequired
        case .hostMismatch: return .misdirectedRequest
        case .upstreamThrottled, .rateLimited: return .tooManyRequests
        }
    }
}
