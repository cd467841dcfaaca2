import Foundation

/// A TCP socket listening on 127.0.0.1, on a port the kernel chose, that
/// nobody accepts on: connects complete into its backlog (up to `backlog`)
/// and then hang. Close-on-exec, as every socket of the suite (ChildProcess).
public final class LoopbackListener: @unchecked Sendable {
    public let fd: Int32
    public let port: Int

    public init(backlog: Int32) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            let why = String(cString: strerror(errno))
            close(fd)
            throw TestSupportError("cannot listen on a loopback port: \(why)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
