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
        let listener = try LoopbackListener(backlog: 8)  // its backlog takes the connect
        let client = try RawClient(port: listener.port)
        #expect(fcntl(client.fd, F_GETFD) & FD_CLOEXEC != 0)
    }
}
