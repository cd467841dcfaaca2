import Foundation

/// A loopback port that refuses connections and stays that way: a socket
/// bound but never listening holds the port, so no other test can take it
/// (a port freed after use could be re-bound by a parallel test's server).
public final class RefusingPort: @unchecked Sendable {
    private let fd: Int32
    public let port: Int

    public init() throws {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0 }
        }
        fd = socketFD
        guard bound else { close(socketFD); throw TestSupportError("cannot reserve a loopback port: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
