import COpenSSL

/// The kind of a `TLSError`: the contract's code for a handshake failure
/// (docs/contract.md §4, §10). Its raw value is the text, used only where
/// text leaves the process (a log line, a refusal, a metric label).
public enum TLSFailureKind: String, Sendable, Hashable, CaseIterable {
    case verifyFailed = "verify_failed"
    case tlsVersion = "tls_version"
    case tlsCipher = "tls_cipher"
    case tlsHandshake = "tls_handshake"
    /// Not a handshake's failure: a context that could not be built.
    case configuration = "tls_configuration"
}

/// Why a TLS leg failed. The handshake cases are the contract's error codes
/// (docs/contract.md §4, §10); each carries OpenSSL's own reason so a log line says
/// exactly what the library saw.
public enum TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Chain or hostname verification failed (`verify_failed`).
    case verifyFailed(String)
    /// No protocol version both sides accept (`tls_version`).
    case tlsVersion(String)
    /// No cipher both sides accept (`tls_cipher`).
    case tlsCipher(String)
    /// Any other handshake failure (`tls_handshake`).
    case tlsHandshake(String)
    /// The peer refused our certificate with an alert (`unknown_ca`,
    /// `bad_certificate`, …): on the interception leg, an app that does not
    /// trust pinproxy's CA. Its contract code is `tls_handshake`.
    case certificateRejected(String)
    /// The transport ended without a close_notify once application data flowed.
    case uncleanShutdown
    /// A record layer failure after the handshake (bad MAC, unexpected message, …).
    case protocolFailure(String)
    /// A context could not be built: bad cipher string, version, key or file.
    case configuration(String)

    /// What kind of failure this is, for the refusal code it becomes
    /// (`ProxyError.tls`) and the metric labels: a value, not text.
    public var kind: TLSFailureKind {
        switch self {
        case .verifyFailed: return .verifyFailed
        case .tlsVersion: return .tlsVersion
        case .tlsCipher: return .tlsCipher
        case .tlsHandshake, .certificateRejected, .uncleanShutdown, .protocolFailure: return .tlsHandshake
        case .configuration: return .configuration
        }
    }

    /// OpenSSL's reason (or ours), without the code.
    public var reason: String {
        switch self {
        case .verifyFailed(let r), .tlsVersion(let r), .tlsCipher(let r), .tlsHandshake(let r),
             .certificateRejected(let r), .protocolFailure(let r), .configuration(let r):
            return r
        case .uncleanShutdown:
            return "connection closed without close_notify"
        }
    }

    public var description: String { "\(kind.rawValue): \(reason)" }
}

/// One entry of OpenSSL's thread-local error queue.
struct OpenSSLErrorEntry: Sendable, Hashable {
    var library: Int32
    var reason: Int32
    var text: String
}

/// OpenSSL's error queue is per thread: every call that can fail is bracketed
/// by `clear()` before and `drain()` after, on the same (event-loop) thread,
/// so an error is never attributed to the wrong connection.
enum OpenSSLErrorQueue {
    static func clear() {
        ERR_clear_error()
    }

    static func drain() -> [OpenSSLErrorEntry] {
        var entries: [OpenSSLErrorEntry] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            entries.append(OpenSSLErrorEntry(
                library: CPinproxy_ERR_GET_LIB(code),
                reason: CPinproxy_ERR_GET_REASON(code),
                text: text))
        }
        return entries
    }

    /// The drained queue as one human-readable reason.
    static func drainReason(or fallback: String) -> String {
        let entries = drain()
        return entries.isEmpty ? fallback : entries.map(\.text).joined(separator: "; ")
    }
}

extension TLSError {
    /// Classifies a failed handshake from the verify result and the error queue
    /// (docs/contract.md §10: protocol-version failures are `tls_version`, no shared cipher
    /// is `tls_cipher`, everything else `tls_handshake`).
    ///
    /// A `handshake_failure` alert means "no shared cipher" only before the
    /// server's hello; after it (`pastServerHello`) the server refused for
    /// another reason, most often a client certificate it requires and
    /// pinproxy does not have (TLS 1.2 servers say so with
    /// `handshake_failure`, TLS 1.3 ones with `certificate_required`).
    static func classifyHandshakeFailure(verifyResult: Int, errors: [OpenSSLErrorEntry], pastServerHello: Bool = false,
                                         fallback: String) -> TLSError {
        let text = errors.isEmpty ? fallback : errors.map(\.text).joined(separator: "; ")
        if verifyResult != Int(X509_V_OK) {
            let reason = String(cString: X509_verify_cert_error_string(verifyResult))
            return .verifyFailed(reason)
        }
        let versionReasons: Set<Int32> = [
            SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_WRONG_VERSION_NUMBER, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION,
            SSL_R_NO_PROTOCOLS_AVAILABLE, SSL_R_UNSUPPORTED_SSL_VERSION, SSL_R_VERSION_TOO_LOW,
        ]
        // A server that shares no cipher answers with a handshake_failure alert;
        // that alert is how a client learns of it.
        let cipherReasons: Set<Int32> = [
            SSL_R_NO_SHARED_CIPHER, SSL_R_NO_CIPHERS_AVAILABLE, SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE,
        ]
        if errors.contains(where: { $0.library == ERR_LIB_SSL && versionReasons.contains($0.reason) }) {
            return .tlsVersion(text)
        }
        if errors.contains(where: { $0.library == ERR_LIB_SSL && $0.reason == SSL_R_CERTIFICATE_VERIFY_FAILED }) {
            return .verifyFailed(text)
        }
        let rejectedCertificateReasons: Set<Int32> = [
            SSL_R_TLSV1_ALERT_UNKNOWN_CA, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN,
            SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE, SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED,
        ]
        if errors.contains(where: { $0.library == ERR_LIB_SSL && rejectedCertificateReasons.contains($0.reason) }) {
            return .certificateRejected(text)
        }
        let clientCertificateReasons: Set<Int32> = [SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE]
        if pastServerHello, errors.contains(where: { $0.library == ERR_LIB_SSL && clientCertificateReasons.contains($0.reason) }) {
            return .tlsHandshake("the server refused the handshake after its hello; it most likely requires a client certificate "
                + "(set tls.client_cert and tls.client_key in the host policy): \(text)")
        }
        if errors.contains(where: { $0.library == ERR_LIB_SSL && cipherReasons.contains($0.reason) }) {
            return .tlsCipher(text)
        }
        return .tlsHandshake(text)
    }

    /// A failed read after the handshake. A TLS 1.3 server checks the client's
    /// certificate only after the client has finished its handshake, so a
    /// server that requires one it did not get says so here, with a
    /// `certificate_required` alert, not during the handshake.
    static func classifyReadFailure(_ errors: [OpenSSLErrorEntry], fallback: String) -> TLSError {
        let text = errors.isEmpty ? fallback : errors.map(\.text).joined(separator: "; ")
        if errors.contains(where: { $0.library == ERR_LIB_SSL && $0.reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED }) {
            return .tlsHandshake("the server requires a client certificate (set tls.client_cert and tls.client_key in the host policy): \(text)")
        }
        return .protocolFailure(text)
    }
}
