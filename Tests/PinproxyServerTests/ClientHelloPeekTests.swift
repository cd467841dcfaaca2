import Foundation
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// `ClientHelloPeek` on ClientHellos written by a real TLS client (`openssl
/// s_client`, captured by a listening socket), whole and cut into pieces.
@Suite(.blockingWaits)
struct ClientHelloPeekTests {
    /// The first bytes `openssl s_client` sends, with `-servername NAME` or `-noservername`.
    static func capturedHello(serverName: String?) throws -> [UInt8] {
        let server = try CaptureSocket()  // closed when it goes out of scope
        // The handshake stalls (nothing answers), so s_client never reads its
        // empty standard input; stopped (SIGTERM, reaped) by its own PID.
        let client = try ChildProcess("openssl", ["s_client", "-connect", "127.0.0.1:\(server.port)"]
            + (serverName.map { ["-servername", $0] } ?? ["-noservername"]),
            outputPath: "/dev/null", errorPath: nil, inputPath: nil)
        defer { client.stop() }
        return try server.readFirstBytes(atLeast: 5)
    }

    @Test func readsTheServerName() throws {
        let hello = try Self.capturedHello(serverName: "api.test")
        #expect(ClientHelloPeek.read(hello) == .tls(serverName: "api.test"))
    }

    @Test func noSNIIsSaidSo() throws {
        let hello = try Self.capturedHello(serverName: nil)
        #expect(ClientHelloPeek.read(hello) == .tls(serverName: nil))
    }

    @Test func everyPrefixNeedsMore() throws {
        let hello = try Self.capturedHello(serverName: "api.test")
        for cut in [0, 1, 4, 5, 9, hello.count / 2, hello.count - 1] where cut > 0 {
            #expect(ClientHelloPeek.read(Array(hello[..<cut])) == .needMore, "cut at \(cut)")
        }
    }

    @Test func aHelloSplitAcrossRecordsIsJoined() throws {
        let hello = try Self.capturedHello(serverName: "split.test")
        let body = Array(hello[5...])
        let half = body.count / 2
        func record(_ part: ArraySlice<UInt8>) -> [UInt8] { [0x16, 0x03, 0x01, UInt8(part.count >> 8), UInt8(part.count & 0xff)] + part }
        #expect(ClientHelloPeek.read(record(body[..<half]) + record(body[half...])) == .tls(serverName: "split.test"))
    }

    @Test func plainHTTPIsNotTLS() {
        #expect(ClientHelloPeek.read(Array("GET / HTTP/1.1\r\n".utf8)) == .notTLS)
    }

    @Test func aHandshakeThatIsNotAClientHelloIsMalformed() {
        // A ServerHello (type 2) where a ClientHello belongs.
        let bytes: [UInt8] = [0x16, 0x03, 0x03, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]
        guard case .malformed = ClientHelloPeek.read(bytes) else {
            Issue.record("\(ClientHelloPeek.read(bytes))")
            return
        }
    }
}

/// A listening socket on loopback (port 0) that keeps the first bytes of one connection.
final class CaptureSocket {
    private let listener: LoopbackListener
    var port: Int { listener.port }

    init() throws {
        listener = try LoopbackListener(backlog: 1)
    }

    /// Accepts one connection and reads until a whole TLS record (or more) is in.
    func readFirstBytes(atLeast minimum: Int) throws -> [UInt8] {
        let client = accept(listener.fd, nil, nil)
        guard client >= 0 else { throw CocoaError(.fileReadUnknown) }
        defer { Glibc.close(client) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = read(client, &chunk, chunk.count)
            guard count > 0 else { break }
            bytes += chunk[..<count]
            if bytes.count >= 5, bytes.count >= 5 + (Int(bytes[3]) << 8 | Int(bytes[4])), bytes.count >= minimum { break }
        }
        return bytes
    }

}
