import Foundation
import PinproxyTestSupport
import Testing

/// How an app's h2 connection ends (docs/contract.md §11): a connection error
/// is GOAWAY then close, with nothing more read; a CONTINUATION flood is
/// refused at the header list bound; a connection without streams closes
/// after `idle_timeout`; `host` without `:authority` is served. The app is
/// the Python `h2` library on a real TLS connection through the CONNECT
/// (Scripts/h2_app.py), with raw frames where HTTP/2 is broken on purpose.
extension HTTP2Tests {
    struct H2AppResult: Decodable {
        /// The response's `:status` (host-only, sensitive), or 0.
        var status: Int
        /// The response head's fields that came HPACK never-indexed.
        var neverIndexed: [String]
        /// The error codes of the GOAWAY frames the proxy sent, in order.
        var goaways: [Int]
        /// The error codes of the RST_STREAM frames it sent.
        var resets: [Int]
        /// How the connection ended: "eof", "reset" (the proxy closed), "timeout", "answered" (sensitive).
        var end: String
        /// Bytes the proxy still took after that end (the attack modes write up to 32 MiB).
        var sentAfter: Int

        var closedByProxy: Bool { end == "eof" || end == "reset" }
    }

    static var h2App: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/h2_app.py").path
    }

    static func runH2App(_ proxy: ProxyHarness, host: String, mode: String, wait: Double = 15) throws -> H2AppResult {
        let app = try ChildProcess("python3", [h2App, String(proxy.port), host, proxy.caFile, mode, String(wait)],
                                   directory: proxy.directory, name: "h2app-\(mode)-\(UUID().uuidString.prefix(8))")
        guard app.waitForExit(timeout: wait + 60) != nil else {
            app.stop()
            throw TestSupportError("h2_app.py \(mode) did not finish: \(app.outputText)")
        }
        guard let line = app.outputText.split(separator: "\n").last(where: { $0.hasPrefix("{\"status\"") }) else {
            throw TestSupportError("no result from h2_app.py \(mode): \(app.outputText)")
        }
        return try JSONDecoder().decode(H2AppResult.self, from: Data(line.utf8))
    }

    /// A proxy of its own with a short `idle_timeout`, in front of the suite's nginx.
    static func shortIdleProxy(_ s: Setup) throws -> ProxyHarness {
        try ProxyHarness(policies: """
            hosts:
              - match: h2.test
                upstream: 127.0.0.1:\(s.nginxPort)
                tls: { ca_file: \(s.pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "limits:\n  idle_timeout: 1s\nnetwork:\n  allow: [127.0.0.0/8]\n")
    }

    static let floodBytes = 32 << 20

    /// The lines of a crashed proxy's output that say why.
    static func crashLines(_ proxy: ProxyHarness) -> String {
        proxy.log.split(separator: "\n").filter { $0.contains("Fatal error") || $0.contains("Assertion failed") }.joined(separator: "\n")
    }

    @Test func aConnectionErrorIsGoAwayThenCloseAndNothingMoreIsRead() async throws {
        let s = try await Self.setup.value
        let result = try Self.runH2App(s.proxy, host: "h2.test", mode: "malformed")
        // A 7-byte PING: FRAME_SIZE_ERROR (0x6), once.
        #expect(result.goaways == [0x6], "\(result)")
        #expect(result.closedByProxy, "\(result)")
        #expect(result.sentAfter < Self.floodBytes, "the proxy kept reading after its GOAWAY: \(result)")
    }

    @Test func aContinuationFloodIsRefusedAtTheHeaderListBoundAndClosed() async throws {
        let s = try await Self.setup.value
        let result = try Self.runH2App(s.proxy, host: "h2.test", mode: "continuation")
        // One GOAWAY with an error (PROTOCOL_ERROR for a block past the header
        // list bound, ENHANCE_YOUR_CALM for too many CONTINUATION frames).
        #expect(result.goaways.count == 1 && [0x1, 0xb].contains(result.goaways[0]), "\(result)")
        #expect(result.closedByProxy, "\(result)")
        #expect(result.sentAfter < Self.floodBytes, "the proxy kept reading after its GOAWAY: \(result)")
    }

    @Test func anH2ConnectionWithoutStreamsClosesAfterIdleTimeout() async throws {
        let s = try await Self.setup.value
        let proxy = try Self.shortIdleProxy(s)
        let result = try Self.runH2App(proxy, host: "h2.test", mode: "idle")
        // Graceful: GOAWAY(NO_ERROR), PING, and once acknowledged the final GOAWAY and close.
        #expect(result.goaways.allSatisfy { $0 == 0 } && !result.goaways.isEmpty, "\(result)")
        #expect(result.end == "eof", "\(result)")
    }

    @Test func hostWithoutAuthorityIsServedAndTheConnectionStillIdles() async throws {
        let s = try await Self.setup.value
        let proxy = try Self.shortIdleProxy(s)
        let result = try Self.runH2App(proxy, host: "h2.test", mode: "host-only")
        #expect(result.status == 200, "\(result)")
        #expect(s.nginxLog.contains { $0.contains("HTTP/2.0 /host-only 200") })
        // The stream's end was counted: the connection is idle again, and closes.
        #expect(result.goaways.allSatisfy { $0 == 0 } && !result.goaways.isEmpty, "\(result)")
        #expect(result.end == "eof", "\(result)")
        // A debug build asserted on the stream's bookkeeping and died here.
        #expect(proxy.process.isRunning, "pinproxy exited: \(Self.crashLines(proxy))")
    }

    @Test func aHeadWithoutHostOrAuthorityIsRefusedOnItsStreamAndTheConnectionStillIdles() async throws {
        let s = try await Self.setup.value
        let proxy = try Self.shortIdleProxy(s)
        let result = try Self.runH2App(proxy, host: "h2.test", mode: "no-authority")
        // The stream is reset (its exchange refuses a head it cannot read) ...
        #expect(result.status == 0 && !result.resets.isEmpty, "\(result)")
        #expect(!s.nginxLog.contains { $0.contains("/no-authority") })
        // ... and its end is counted even though it came within its first read:
        // the connection is idle again, and closes.
        #expect(result.goaways.allSatisfy { $0 == 0 } && !result.goaways.isEmpty, "\(result)")
        #expect(result.end == "eof", "\(result)")
        #expect(proxy.process.isRunning, "pinproxy exited: \(Self.crashLines(proxy))")
    }
}
