import COpenSSL

/// A TLS protocol version as the policy files spell it ("1.2", "1.3").
public enum TLSVersion: String, Sendable, Hashable, CaseIterable, Comparable {
    case v1_0 = "1.0"
    case v1_1 = "1.1"
    case v1_2 = "1.2"
    case v1_3 = "1.3"

    /// Parses "1.2", "TLSv1.2" or "tls1.2".
    public init?(parsing text: String) {
        var t = text.lowercased()
        for prefix in ["tlsv", "tls"] where t.hasPrefix(prefix) {
            t.removeFirst(prefix.count)
            break
        }
        self.init(rawValue: t)
    }

    /// The version as OpenSSL numbers it (`TLS1_2_VERSION`, …).
    var openSSLValue: Int32 {
        switch self {
        case .v1_0: return TLS1_VERSION
        case .v1_1: return TLS1_1_VERSION
        case .v1_2: return TLS1_2_VERSION
        case .v1_3: return TLS1_3_VERSION
        }
    }

    /// The name OpenSSL reports for a negotiated version ("TLSv1.3").
    init?(openSSLName: String) {
        switch openSSLName {
        case "TLSv1": self = .v1_0
        case "TLSv1.1": self = .v1_1
        case "TLSv1.2": self = .v1_2
        case "TLSv1.3": self = .v1_3
        default: return nil
        }
    }

    /// Legacy versions need an explicit opt-in (`allow_legacy_tls`).
    public var isLegacy: Bool { self < .v1_2 }

    public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool {
        lhs.openSSLValue < rhs.openSSLValue
    }
}
