import Foundation
import NIOCore
import NIOPosix
import PinproxyTLS

/// `pin --connect`'s failures in words: NIO's errors print as nested
/// structures (`SingleConnectionFailure(target: [IPv4]…, error: …)`) that
/// tell a user nothing they can act on.
enum ConnectFailure {
    static func describe(_ error: any Error, host: String, port: Int) -> String {
        switch error {
        case let failure as NIOConnectionError:
            if failure.connectionErrors.isEmpty {
                return "cannot resolve \(host) (no address found)"
            }
            var seen = Set<String>()
            let reasons = failure.connectionErrors.map { "\(address($0.target)) \(reason($0.error))" }.filter { seen.insert($0).inserted }
            return "cannot connect: " + reasons.joined(separator: "; ")
        case let tls as TLSError:
            return "TLS handshake failed: \(tls.reason)"
        default:
            return "cannot connect to \(host):\(port): \(reason(error))"
        }
    }

    /// `127.0.0.1:443`, `[::1]:443`.
    static func address(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        if case .v6 = address { return "[\(ip)]:\(port)" }
        return "\(ip):\(port)"
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case let io as IOError:
            // strerror: "Connection refused" → "connection refused".
            let text = String(cString: strerror(io.errnoCode))
            return text.prefix(1).lowercased() + text.dropFirst()
        case ChannelError.connectTimeout(let timeout):
            return "did not answer within \(timeout.nanoseconds / 1_000_000_000) s"
        default:
            return "\(error)"
        }
    }
}
