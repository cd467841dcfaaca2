import Foundation
import NIOCore
import NIOHTTP1
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// The exchange state machine with no I/O at all: tables of events and the
/// actions expected, for every refusal, pipelining, 100-continue, HEAD, the
/// 401 replay, the timeouts, and either side going away mid-body.
@Suite("Exchange state machine")
struct ExchangeStateMachineTests {
    final class Upstream {}
    typealias Machine = ExchangeStateMachine<Upstream>

    /// One policy set for all tables: a plain host, a token-attaching host, a denied host.
    static let snapshot = PolicySnapshot.loaded(policies: """
            hosts:
              - match: plain.test
                action: intercept
                response_timeout: 3s
              - match: token.test
                action: intercept
                auth: { spotify: app }
              - match: denied.test
                action: deny
              - match: ws-denied.test
                action: intercept
                websocket: deny
            """, main: """
            spotify:
              accounts: https://accounts.test
              sessions:
                app: { flow: client_credentials, client_id: id, client_secret: secret }
            """, directory: "pinproxy-machine")

    @Test(arguments: [
        // Table: events → actions, one scenario a row.
        ("GET, pooled, pipelined next",
         [Event.head(.GET, "/a", []), .end, .acquired(reused: true), .responseHead(200, keepAlive: true), .responseBody(10), .responseEnd],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200)", "responseBody(10)", "endResponse(reuse log=200 takeNext)"]),
        ("POST body waits for its head",
         [.head(.POST, "/p", [("Content-Length", "8")]), .body(5), .acquired(reused: false), .body(3), .end, .readComplete],
         ["acquire", "-", "send(POST parts=1 cl=8 read)", "forwardBody(3)", "forwardEnd", "flushUpstream"]),
        ("the body waits while the token is fetched",
         [.head(.POST, "/p", [("Content-Length", "4"), ("Authorization", "Basic app")]), .readComplete, .acquiredWithToken,
          .body(4), .end, .readComplete, .token],
         ["acquire", "-", "fetchToken(app)", "-", "-", "-", "send(POST parts=2 cl=4 auth=Bearer T0KEN flush)"]),
        ("a 401 is swallowed and the request replayed once with a fresh token",
         [.head(.PUT, "/q", [("Content-Length", "3")]), .body(3), .end, .readComplete, .acquiredWithToken, .token,
          .responseHead(401, keepAlive: true), .responseBody(10), .responseEnd, .acquiredWithToken, .token,
          .responseHead(401, keepAlive: true)],
         ["acquire", "-", "-", "-", "fetchToken(app)", "send(PUT parts=2 cl=3 auth=Bearer T0KEN flush)",
          "invalidate(app#7)", "-", "reacquire(reuse)", "fetchToken(app)", "send(PUT parts=2 cl=3 auth=Bearer T0KEN flush)",
          "responseHead(401)"]),
        ("a request without a usable Host is refused and the connection closed",
         [.head(.GET, "/", [("Host", "")])],
         ["refuse(400 bad_request close log=400 nothing)"]),
        ("100-continue passes through, then the final answer",
         [.head(.POST, "/c", [("Content-Length", "2"), ("Expect", "100-continue")]), .readComplete, .acquired(reused: false),
          .responseHead(100, keepAlive: true), .body(2), .end, .responseHead(200, keepAlive: true), .responseEnd],
         ["acquire", "-", "send(POST parts=0 cl=2 flush read)", "informational(100)", "forwardBody(2)", "forwardEnd",
          "responseHead(200)", "endResponse(reuse log=200 takeNext)"]),
        ("an early answer ends the exchange; its connection is not reused",
         [.head(.POST, "/big", [("Content-Length", "100")]), .acquired(reused: false), .body(10),
          .responseHead(413, keepAlive: true), .responseEnd, .body(90), .end],
         ["acquire", "send(POST parts=0 cl=100 read)", "forwardBody(10)", "responseHead(413)",
          "endResponse(discard nothing)", "-", "finish(log=413 takeNext)"]),
        ("an unasked 101 ends the upstream connection",
         [.head(.GET, "/u", []), .end, .acquired(reused: false), .responseHead(101, keepAlive: true)],
         ["acquire", "-", "send(GET parts=1)", "refuse(502 connect_failed discard log=502 takeNext)"]),
        ("a reused connection lost before any answer: a GET goes again",
         [.head(.GET, "/g", []), .end, .acquired(reused: true), .readComplete, .upstreamLost(nil), .acquired(reused: false)],
         ["acquire", "-", "send(GET parts=1)", "flushUpstream", "reacquire(discard)", "send(GET parts=1 flush)"]),
        ("a reused connection lost before any answer: a POST is never sent twice",
         [.head(.POST, "/p", [("Content-Length", "0")]), .end, .acquired(reused: true), .upstreamLost(nil)],
         ["acquire", "-", "send(POST parts=1 cl=0)", "refuse(502 connect_failed discard log=502 takeNext)"]),
        ("stray bytes on a reused connection are an answer: no retry",
         [.head(.GET, "/s", []), .end, .acquired(reused: true), .upstreamLost(.invalidStatus)],
         ["acquire", "-", "send(GET parts=1)", "refuse(502 connect_failed discard log=502 takeNext)"]),
        ("the upstream goes away mid-body: the app's connection is cut",
         [.head(.GET, "/m", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: true), .responseBody(5), .upstreamLost(nil)],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200)", "responseBody(5)", "abort(discard upstream_closed)"]),
        ("the app goes away mid-body: the upstream is discarded and the line says 499",
         [.head(.POST, "/m", [("Content-Length", "10")]), .acquired(reused: false), .body(4), .clientLeft],
         ["acquire", "send(POST parts=0 cl=10 read)", "forwardBody(4)", "clientGone(discard log=499)"]),
        ("no response head within response_timeout: 504",
         [.head(.GET, "/t", []), .end, .acquired(reused: false), .after(seconds: 4, clientWritable: true, upstreamWritable: true)],
         ["acquire", "-", "send(GET parts=1)", "refuse(504 upstream_timeout discard log=504 takeNext)"]),
        ("a stall between body reads cuts the app's connection",
         [.head(.GET, "/t", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: true),
          .after(seconds: 2, clientWritable: true, upstreamWritable: true), .responseBody(1),
          .after(seconds: 4, clientWritable: true, upstreamWritable: true)],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200)", "-", "responseBody(1)", "abort(discard upstream_timeout)"]),
        ("a slow app is not a stalled upstream",
         [.head(.GET, "/t", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: true),
          .after(seconds: 4, clientWritable: false, upstreamWritable: true)],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200)", "-"]),
        ("a stalled request body is cut with 408 and its upstream discarded",
         [.head(.POST, "/s", [("Content-Length", "10")]), .acquired(reused: false), .body(2),
          .after(seconds: 3, clientWritable: true, upstreamWritable: true)],
         ["acquire", "send(POST parts=0 cl=10 read)", "forwardBody(2)", "refuse(408 bad_request discard close log=408 nothing)"]),
        ("a body held back by the upstream is not stalled",
         [.head(.POST, "/s", [("Content-Length", "10")]), .acquired(reused: false), .body(2),
          .after(seconds: 3, clientWritable: true, upstreamWritable: false)],
         ["acquire", "send(POST parts=0 cl=10 read)", "forwardBody(2)", "-"]),
        ("a refused request's small body is read, then the next request",
         [.head(.POST, "/p", [("Content-Length", "4")]), .acquireFailed(ProxyError(.queueTimeout, host: "plain.test", detail: "busy")),
          .body(4), .end],
         ["acquire", "refuse(503 queue_timeout nothing)", "-", "finish(log=503 takeNext)"]),
        ("an ambiguous head is refused and the connection closed",
         [.head(.GET, "/", [("Content-Length", "1"), ("Transfer-Encoding", "chunked")])],
         ["refuse(400 bad_request close log=400 nothing)"]),
        ("a Host that is not the CONNECT host is 421, and the request is read to its end",
         [.head(.GET, "/", [("Host", "other.test")]), .end],
         ["refuse(421 host_mismatch nothing)", "finish(log=421 takeNext)"]),
        ("an answer on the held connection while the token is fetched drops that connection",
         [.head(.GET, "/t", []), .end, .acquiredWithToken, .responseHead(200, keepAlive: true), .acquiredWithToken, .token],
         ["acquire", "-", "fetchToken(app)", "reacquire(discard)", "fetchToken(app)", "send(GET parts=1 auth=Bearer T0KEN)"]),
        ("a body on a request whose head frames none never goes up (an HTTP/2 stream's shape)",
         [.head(.GET, "/s", []), .acquired(reused: false), .body(5)],
         ["acquire", "send(GET parts=0 read)", "refuse(400 bad_request discard close log=400 nothing)"]),
        ("bytes beyond the Content-Length never go up",
         [.head(.POST, "/l", [("Content-Length", "4")]), .acquired(reused: false), .body(3), .body(2)],
         ["acquire", "send(POST parts=0 cl=4 read)", "forwardBody(3)", "refuse(400 bad_request discard close log=400 nothing)"]),
        ("a body held before the head went up is refused all the same",
         [.head(.DELETE, "/d", []), .body(7)],
         ["acquire", "refuse(400 bad_request close log=400 nothing)"]),
        ("a body with a 204 is dropped: the response ends, its upstream is not reused",
         [.head(.GET, "/n", []), .end, .acquired(reused: false), .responseHead(204, keepAlive: true), .responseBody(5), .responseEnd],
         ["acquire", "-", "send(GET parts=1)", "responseHead(204)", "endResponse(discard log=204 takeNext)", "-"]),
        ("a body with a HEAD answer is dropped likewise",
         [.head(.HEAD, "/hb", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: true), .responseBody(10), .responseEnd],
         ["acquire", "-", "send(HEAD parts=1)", "responseHead(200)", "endResponse(discard log=200 takeNext)", "-"]),
        ("HEAD: the answer's head, then its end",
         [.head(.HEAD, "/h", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: true), .responseEnd],
         ["acquire", "-", "send(HEAD parts=1)", "responseHead(200)", "endResponse(reuse log=200 takeNext)"]),
        ("Connection: close from the upstream: not reused",
         [.head(.GET, "/c", []), .end, .acquired(reused: false), .responseHead(200, keepAlive: false), .responseEnd],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200)", "endResponse(discard log=200 takeNext)"]),
    ] as [(String, [Event], [String])])
    func table(name: String, events: [Event], expected: [String]) {
        let actual = Self.run(events)
        #expect(actual == expected, "\(name)")
    }

    @Test func pipelinedPartsWaitUntilTheExchangeEnds() {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        let upstream = Upstream()
        let interception = RequestRouter.Interception(host: "plain.test", port: 443, policy: Self.snapshot.policy(forHost: "plain.test")!)
        let now = NIODeadline.now()
        let first = AppRequestHead.read(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/1", headers: ["Host": "plain.test"]))
        let second = AppRequestHead.read(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/2", headers: ["Host": "plain.test"]))
        guard case .route = machine.received(.head(first), now: now) else { Issue.record("route"); return }
        _ = machine.routed(first, RequestRouter.route(first, interception: interception, snapshot: Self.snapshot, maxHeadBytes: 65_536), now: now)
        _ = machine.received(.end(nil), now: now)
        #expect(Self.describe(machine.received(.head(second), now: now)) == "-")
        #expect(Self.describe(machine.received(.end(nil), now: now)) == "-")
        #expect(machine.nextQueuedPart() == nil, "nothing is taken while the first exchange runs")
        _ = machine.upstreamAcquired(upstream, reused: false, pin: nil, address: "x", authorization: .untouched, now: now)
        _ = machine.responseHead(.http1(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "0"])), now: now)
        guard case .endResponse(_, _, _, _, let finished?, .takeNext) = machine.responseEnd(nil) else { Issue.record("end"); return }
        #expect(finished.target == "/1")
        guard case .head(let next)? = machine.nextQueuedPart() else { Issue.record("the queued head comes next"); return }
        #expect(next.uri == "/2")
    }

    static let webSocketHeaders = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                                   ("Sec-WebSocket-Version", "13")]

    @Test(arguments: [
        // Table: WebSocket upgrades (docs/contract.md §11), events → actions.
        ("an allowed upgrade goes up with its upgrade fields; the 101 becomes a splice",
         [Event.head(.GET, "/ws", webSocketHeaders), .end, .acquired(reused: false), .switching, .responseEnd],
         ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "responseHead(101 Upgrade)", "splice(log=101)"]),
        ("a non-101 answer to an upgrade is an ordinary response, and the connection closes after it",
         [.head(.GET, "/ws", webSocketHeaders), .end, .acquired(reused: false), .responseHead(426, keepAlive: true), .responseBody(10), .responseEnd],
         ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "responseHead(426 close)", "responseBody(10)",
          "endResponse(reuse close log=426 nothing)"]),
        ("an upgrade request with a body: the body goes up, then the 101 splices",
         [.head(.GET, "/ws", webSocketHeaders + [("Content-Length", "4")]), .acquired(reused: false), .body(4), .end, .switching, .responseEnd],
         ["acquire", "send(GET parts=0 cl=4 upgrade=websocket connection=Upgrade read)", "forwardBody(4)", "forwardEnd",
          "responseHead(101 Upgrade)", "splice(log=101)"]),
        ("a 101 before the upgrade request's body is complete ends both connections",
         [.head(.GET, "/ws", webSocketHeaders + [("Content-Length", "4")]), .acquired(reused: false), .body(2), .switching],
         ["acquire", "send(GET parts=0 cl=4 upgrade=websocket connection=Upgrade read)", "forwardBody(2)",
          "refuse(502 connect_failed discard close log=502 nothing)"]),
        ("a request pipelined after the upgrade request: the 101 cannot be spliced",
         [.head(.GET, "/ws", webSocketHeaders), .end, .head(.GET, "/next", []), .end, .acquired(reused: false), .switching],
         ["acquire", "-", "-", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "refuse(502 connect_failed discard close log=502 nothing)"]),
        ("a 101 naming another protocol is refused",
         [.head(.GET, "/ws", webSocketHeaders), .end, .acquired(reused: false), .responseHead(101, keepAlive: true)],
         ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "refuse(502 connect_failed discard close log=502 nothing)"]),
        ("another upgrade (h2c) is stripped as hop-by-hop, and the connection closes after its answer",
         [.head(.GET, "/", [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAA")]), .end,
          .acquired(reused: false), .responseHead(200, keepAlive: true), .responseEnd],
         ["acquire", "-", "send(GET parts=1)", "responseHead(200 close)", "endResponse(reuse close log=200 nothing)"]),
        ("the upstream lost between its 101 and the splice: the app's connection is cut",
         [.head(.GET, "/ws", webSocketHeaders), .end, .acquired(reused: false), .switching, .upstreamLost(nil)],
         ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "responseHead(101 Upgrade)", "abort(discard upstream_closed)"]),
        ("the app leaves between the 101 and the splice: the upstream is discarded, the line says 101",
         [.head(.GET, "/ws", webSocketHeaders), .end, .acquired(reused: false), .switching, .clientLeft],
         ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "responseHead(101 Upgrade)", "clientGone(discard log=101)"]),
        ("the token is attached to the upgrade request",
         [.head(.GET, "/ws", webSocketHeaders), .end, .acquiredWithToken, .token, .switching, .responseEnd],
         ["acquire", "-", "fetchToken(app)", "send(GET parts=1 auth=Bearer T0KEN upgrade=websocket connection=Upgrade)",
          "responseHead(101 Upgrade)", "splice(log=101)"]),
    ] as [(String, [Event], [String])])
    func webSocket(name: String, events: [Event], expected: [String]) {
        #expect(Self.run(events) == expected, "\(name)")
    }

    @Test func aDeniedUpgradeIsRefusedWith403AndTheConnectionClosed() {
        let actual = Self.run([.head(.GET, "/ws", Self.webSocketHeaders)], host: "ws-denied.test")
        #expect(actual == ["refuse(403 upgrade_denied close log=403 nothing)"])
        // The same policy serves plain requests as before.
        #expect(Self.run([.head(.GET, "/", []), .end], host: "ws-denied.test") == ["acquire", "-"])
    }

    @Test func nothingHTTPComesAfterTheSplice() {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        let out = Self.run([.head(.GET, "/ws", Self.webSocketHeaders), .end, .acquired(reused: false), .switching, .responseEnd,
                            .head(.GET, "/later", []), .readComplete, .after(seconds: 10, clientWritable: true, upstreamWritable: true),
                            .clientLeft], machine: &machine)
        #expect(out == ["acquire", "-", "send(GET parts=1 upgrade=websocket connection=Upgrade)", "responseHead(101 Upgrade)", "splice(log=101)",
                        "-", "-", "-", "-"])
        #expect(machine.nextQueuedPart() == nil)
    }

    @Test func aClosingRequestClosesAfterItsResponse() {
        let actual = Self.run([.head(.GET, "/c", [("Connection", "close")]), .end, .acquired(reused: false),
                               .responseHead(200, keepAlive: true), .responseEnd])
        #expect(actual == ["acquire", "-", "send(GET parts=1)", "responseHead(200 close)", "endResponse(reuse close log=200 nothing)"])
    }
}
