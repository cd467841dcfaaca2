import NIOHTTP1
import Testing

@testable import PinproxyServer

/// `Via` names the protocol pinproxy received each message in (RFC 9110 §7.6.3).
@Suite("Via")
struct ViaTests {
    @Test(arguments: [
        (HTTPVersion(major: 2, minor: 0), "2 pinproxy"),
        (HTTPVersion(major: 1, minor: 1), "1.1 pinproxy"),
        (HTTPVersion(major: 1, minor: 0), "1.0 pinproxy"),
    ])
    func aForwardedRequestSaysWhatTheAppSpoke(version: HTTPVersion, via: String) throws {
        let client = HTTPRequestHead(version: version, method: .GET, uri: "/x", headers: ["host": "a.test"])
        let up = MessageRules.upstreamHead(from: client, target: "/x", hostHeader: "a.test", rules: nil,
                                           framing: try RequestFraming.of(client).get())
        #expect(up.headers["via"] == [via])
    }

    @Test(arguments: [
        (HTTPVersion(major: 2, minor: 0), "2 pinproxy"),
        (HTTPVersion(major: 1, minor: 1), "1.1 pinproxy"),
    ])
    func aForwardedResponseSaysWhatTheUpstreamSpoke(version: HTTPVersion, via: String) {
        let upstream = HTTPResponseHead(version: version, status: .ok, headers: ["content-length": "0"])
        #expect(MessageRules.clientHead(from: upstream, closing: false).headers["via"] == [via])
    }
}
