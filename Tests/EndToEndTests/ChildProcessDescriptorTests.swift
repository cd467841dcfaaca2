import Foundation
import PinproxyTestSupport
import Testing

/// A child process gets standard input, output and error, and no other
/// descriptor of the test process. Tests run side by side: a socket one test
/// closes to show the server an app leaving (a CONNECT abandoned during its
/// dial, an admin slot freed, a burst of idle clients drained) once stayed
/// open in a curl or pinproxy another test had spawned meanwhile, and the
/// server saw no close until that child exited.
@Suite("Children inherit no descriptors", .blockingWaits)
struct ChildProcessDescriptorTests {
    /// The descriptors the child's shell has open, from /proc.
    static func childDescriptors() throws -> Set<Int32> {
        let listing = try ChildProcess.check("/bin/sh", ["-c", "ls /proc/$$/fd"])
        return Set(listing.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) })
    }

    @Test func aSocketOpenedWithoutCloseOnExecStaysInTheTestProcess() throws {
        // Opened as code outside the suite's own helpers might open one.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 3)
        defer { close(fd) }
        let inherited = try Self.childDescriptors()
        #expect(!inherited.contains(fd), "the child holds descriptor \(fd): \(inherited.sorted())")
        #expect(inherited.allSatisfy { $0 <= 2 }, "\(inherited.sorted())")
    }

    @Test func theRawClientsSocketIsCloseOnExec() throws {
        // A listener whose backlog takes the connect (nobody accepts it).
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 8) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(listening)
        let client = try RawClient(port: Int(UInt16(bigEndian: address.sin_port)))
        #expect(fcntl(client.fd, F_GETFD) & FD_CLOEXEC != 0)
    }
}
