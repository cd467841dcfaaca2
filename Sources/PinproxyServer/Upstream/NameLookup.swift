import NIOCore
import NIOPosix

/// Name resolution on the thread pool (getaddrinfo blocks), so that the SSRF
/// guard sees every address before any is dialled (`GuardedResolver`).
enum NameLookup {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func resolve(_ host: String, port: Int, on loop: any EventLoop) -> EventLoopFuture<[SocketAddress]> {
        // Literals need no lookup.
        if let address = try? SocketAddress(ipAddress: host, port: port) {
            return loop.makeSucceededFuture([address])
        }
        return NIOThreadPool.singleton.runIfActive(eventLoop: loop) {
            try lookup(host, port: port)
        }
    }

    private static func lookup(_ host: String, port: Int) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let first = result else {
            throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var seen = Set<String>()
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let sockaddr = entry.pointee.ai_addr {
                let address: SocketAddress?
                switch entry.pointee.ai_family {
                case AF_INET:
                    address = sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { SocketAddress($0.pointee, host: host) }
                case AF_INET6:
                    address = sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { SocketAddress($0.pointee, host: host) }
                default:
                    address = nil
                }
                if let address, seen.insert(address.description).inserted {
                    addresses.append(address)
                }
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw Failure(description: "\(host) has no addresses") }
        return addresses
    }
}

extension SocketAddress {
    /// The raw address bytes (4 or 16), for the SSRF guard.
    var addressBytes: [UInt8]? {
        switch self {
        case .v4(let v4):
            return withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6):
            return withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        case .unixDomainSocket:
            return nil
        }
    }
}
