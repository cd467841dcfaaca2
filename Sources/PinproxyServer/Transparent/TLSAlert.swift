import NIOCore

/// A fatal TLS alert as raw bytes: the only refusal a TLS client can read
/// before any handshake (no HTTP is possible on a redirected TLS connection).
enum TLSAlert {
    /// RFC 8446 §6: `access_denied`, for every refusal of a transparent
    /// connection (the access line and metrics carry the contract's code).
    static let accessDenied: UInt8 = 49
    /// `internal_error`, when the upstream could not be reached.
    static let internalError: UInt8 = 80

    /// One alert record: type 21, version TLS 1.2 (what a record says
    /// before a version is agreed), length 2, level fatal, description.
    static func record(_ description: UInt8) -> ByteBuffer {
        ByteBuffer(bytes: [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description])
    }

    /// The alert for a refusal with `code`: an upstream that could not be
    /// reached is pinproxy's failure, everything else a denial.
    static func description(for code: ProxyError.Code) -> UInt8 {
        switch code {
        case .connectFailed, .upstreamTimeout, .queueTimeout, .tlsHandshake, .tokenUnavailable: return internalError
        case .clientDenied, .proxyAuthRequired, .hostDenied, .portDenied, .ssrfBlocked, .pinMismatch, .pinsExpired,
             .verifyFailed, .tlsVersion, .tlsCipher, .badRequest, .hostMismatch, .upgradeDenied,
             .upstreamThrottled, .rateLimited:
            return accessDenied
        }
    }
}
