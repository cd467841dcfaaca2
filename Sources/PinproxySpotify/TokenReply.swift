import Foundation
import PinproxyPolicy

/// The accounts service's answer, classified (docs/contract.md §7): on the status and
/// the OAuth `error` code only, never on `error_description` text. Token
/// values are held as `Secret`s so that printing a reply shows none of them.
enum TokenReply: Equatable, Sendable {
    case granted(Grant)
    /// 429: not before `retryAfter` (nil when the header is absent or unreadable).
    case rateLimited(retryAfter: Date?)
    /// `invalid_client`, on any 4xx.
    case invalidClient
    /// `invalid_grant`, on any 4xx: the refresh token (or code) is dead.
    case invalidGrant
    /// Any other OAuth error code on a 4xx (`invalid_request`,
    /// `unsupported_grant_type`, `unauthorized_client`, `invalid_scope`…):
    /// retrying the same request cannot help, so treated as configuration.
    case rejected(code: String, status: Int)
    /// 5xx, a 4xx without an OAuth code, or a 200 that is not a bearer token
    /// reply: transient, retried with backoff.
    case failed(reason: String)

    struct Grant: Equatable, Sendable {
        var accessToken: Secret
        var lifetime: TimeInterval
        var refreshToken: Secret?
        var scope: String?
    }

    init(_ response: TokenEndpointResponse, now: Date) {
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        switch response.status {
        case 200:
            self = Self.grant(json)
        case 429:
            self = .rateLimited(retryAfter: response.header("Retry-After").flatMap { RetryAfter.parse($0, now: now) })
        case 400..<500:
            guard let code = json?["error"] as? String, !code.isEmpty else {
                self = .failed(reason: "HTTP \(response.status) without an OAuth error code")
                return
            }
            switch code {
            case "invalid_client": self = .invalidClient
            case "invalid_grant": self = .invalidGrant
            default: self = .rejected(code: Self.printable(code), status: response.status)
            }
        default:
            self = .failed(reason: "HTTP \(response.status)")
        }
    }

    private static func grant(_ json: [String: Any]?) -> TokenReply {
        guard let json else { return .failed(reason: "HTTP 200 whose body is not a JSON object") }
        guard let token = json["access_token"] as? String, !token.isEmpty else {
            return .failed(reason: "HTTP 200 without access_token")
        }
        guard let type = json["token_type"] as? String, type.caseInsensitiveCompare("bearer") == .orderedSame else {
            return .failed(reason: "HTTP 200 whose token_type is not bearer")
        }
        // JSONSerialization gives NSNumber for both 3600 and 3600.0.
        guard let lifetime = (json["expires_in"] as? NSNumber)?.doubleValue, lifetime > 0, lifetime.isFinite else {
            return .failed(reason: "HTTP 200 without a positive expires_in")
        }
        let refresh = (json["refresh_token"] as? String).flatMap { $0.isEmpty ? nil : Secret($0) }
        return .granted(Grant(accessToken: Secret(token), lifetime: lifetime, refreshToken: refresh, scope: json["scope"] as? String))
    }

    /// An error code goes into logs and errors: keep it short and plain.
    private static func printable(_ code: String) -> String {
        let allowed = code.unicodeScalars.filter { ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        return String(String.UnicodeScalarView(allowed.prefix(64)))
    }
}
