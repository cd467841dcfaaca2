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
    static let snapshot: PolicySnapshot = {
        let dir = try! TemporaryDirectory("pinproxy-machine")
        _ = try! dir.write("etc/pinproxy.yaml", """
            policies: policies
            ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
            spotify:
              accounts: https://accounts.test
              sessions:
                app: { flow: client_credentials, client_id: id, client_secret: secret }
            """)
        _ = try! dir.write("etc/policies/p.yaml", """
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
            """)
        let result = PolicyLoader(configFile: dir.file("etc/pinproxy.yaml"), environment: [:], workingDirectory: dir.path).load()
        return result.snapshot!
    }()

    /// The events of the tables.
    enum Event {
        case head(HTTPMethod, String, [(String, String)])
        case body(Int)
        case end
        case readComplete
        case acquired(reused: Bool)
        case acquiredWithToken
        case acquireFailed(ProxyError)
        case token
        case responseHead(Int, keepAlive: Bool)
        /// `101` with `Upgrade: websocket` and `Connection: Upgrade`.
        case switching
        case responseBody(Int)
        case responseEnd
        case upstreamLost(HTTPParserError?)
        case clientLeft
        case after(seconds: Int64, clientWritable: Bool, upstreamWritable: Bool)
    }

    /// Drives a machine through `events` and returns each action, described.
    static func run(_ events: [Event], host: String? = nil, machine: inout Machine) -> [String] {
        // Scenarios that attach a token run under the policy that names a session.
        let host = host ?? (events.contains { if case .acquiredWithToken = $0 { return true } else { return false } } ? "token.test" : "plain.test")
        let upstream = Upstream()
        let interception = RequestRouter.Interception(host: host, port: 443, policy: snapshot.policy(forHost: host)!)
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var out: [String] = []
        for event in events {
            var action: Machine.Action
            switch event {
            case .head(let method, let uri, let headers):
                let head = HTTPRequestHead(version: .http1_1, method: method, uri: uri,
                                           headers: HTTPHeaders((headers.contains { $0.0 == "Host" } ? [] : [("Host", host)]) + headers))
                action = machine.received(.head(head), now: now)
                if case .route(let routed) = action {
                    let decision = RequestRouter.route(routed, interception: interception, snapshot: snapshot, maxHeadBytes: 65_536)
                    action = machine.routed(routed, decision, now: now)
                }
            case .body(let count):
                action = machine.received(.body(ByteBuffer(repeating: 0x61, count: count)), now: now)
            case .end:
                action = machine.received(.end(nil), now: now)
            case .readComplete:
                action = machine.clientReadComplete(upstreamWritable: true)
            case .acquired(let reused):
                action = machine.upstreamAcquired(upstream, reused: reused, pinVerdict: nil, address: "127.0.0.1:1",
                                                  authorization: .untouched, now: now)
            case .acquiredWithToken:
                action = machine.upstreamAcquired(upstream, reused: true, pinVerdict: nil, address: "127.0.0.1:1",
                                                  authorization: .attach(session: "app"), now: now)
            case .acquireFailed(let error):
                action = machine.upstreamFailed(error)
            case .token:
                action = machine.tokenArrived("T0KEN", generation: TokenGeneration(rawValue: 7), for: upstream, now: now)
            case .responseHead(let status, let keepAlive):
                var headers = HTTPHeaders([("Content-Length", "10")])
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                action = machine.responseHead(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers), now: now)
            case .switching:
                let headers = HTTPHeaders([("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "abc=")])
                action = machine.responseHead(HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers), now: now)
            case .responseBody(let count):
                action = machine.responseBody(ByteBuffer(repeating: 0x62, count: count), now: now)
            case .responseEnd:
                action = machine.responseEnd(nil)
            case .upstreamLost(let error):
                action = machine.upstreamClosed(error)
            case .clientLeft:
                action = machine.clientClosed()
            case .after(let seconds, let clientWritable, let upstreamWritable):
                now = now + .seconds(seconds)
                action = machine.deadlinesPassed(now: now, clientWritable: clientWritable, upstreamWritable: upstreamWritable)
            }
            out.append(describe(action))
        }
        return out
    }

    static func run(_ events: [Event], host: String? = nil) -> [String] {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        return run(events, host: host, machine: &machine)
    }

    static func describe(_ action: Machine.Action) -> String {
        switch action {
        case .none: return "-"
        case .route: return "route"
        case .passOn: return "passOn"
        case .acquireUpstream: return "acquire"
        case .fetchToken(let credential, _, _): return "fetchToken(\(credential))"
        case .sendRequest(let head, let pending, _, let flush, let readClient):
            let auth = head.headers["authorization"].first.map { " auth=\($0)" } ?? ""
            let framing = head.headers["content-length"].first.map { " cl=\($0)" } ?? (head.headers["transfer-encoding"].first.map { " te=\($0)" } ?? "")
            let upgrade = head.headers["upgrade"].first.map { " upgrade=\($0) connection=\(head.headers["connection"].joined(separator: ","))" } ?? ""
            return "send(\(head.method) parts=\(pending.count)\(framing)\(auth)\(upgrade)\(flush ? " flush" : "")\(readClient ? " read" : ""))"
        case .forwardBody(let body, _): return "forwardBody(\(body.readableBytes))"
        case .forwardEnd: return "forwardEnd"
        case .writeInformational(let head): return "informational(\(head.status.code))"
        case .writeResponseHead(let head, let throttles):
            return "responseHead(\(head.status.code)\(head.headers["connection"].first.map { " \($0)" } ?? "")\(throttles.map { " throttles=\($0.credential)" } ?? ""))"
        case .writeResponseBody(let body): return "responseBody(\(body.readableBytes))"
        case .endResponse(_, _, let reusable, let close, let finished, let next):
            return "endResponse(\(reusable ? "reuse" : "discard")\(close ? " close" : "")\(finished.map { " log=\($0.status ?? 0)" } ?? "") \(next))"
        case .invalidateToken(let credential, let generation): return "invalidate(\(credential)#\(generation.rawValue))"
        case .releaseAndAcquire(let upstream, let reusable, _):
            return "reacquire(\(upstream == nil ? "none" : (reusable ? "reuse" : "discard")))"
        case .refuse(let error, let upstream, let reusable, let close, let finished, let next):
            let release = upstream == nil ? "" : (reusable ? " giveBack" : " discard")
            return "refuse(\(error.status.code) \(error.code.rawValue)\(release)\(close ? " close" : "")\(finished.map { " log=\($0.status ?? 0)" } ?? "") \(next))"
        case .abort(let upstream, let finished):
            return "abort(\(upstream == nil ? "" : "discard ")\(finished.failure?.text ?? finished.error?.code.rawValue ?? "-"))"
        case .finish(let exchange, let next): return "finish(log=\(exchange.status ?? 0) \(next))"
        case .splice(_, let finished): return "splice(log=\(finished.status ?? 0))"
        case .abandonSplice(_, let finished): return "abandonSplice(log=\(finished.status ?? 0) \(finished.failure?.text ?? "-"))"
        case .clientGone(let upstream, let finished):
            return "clientGone(\(upstream == nil ? "" : "discard ")\(finished.map { "log=\($0.status ?? 0)" } ?? "-"))"
        case .giveBack: return "giveBack"
        case .flushUpstream(_, let read): return "flushUpstream\(read ? "+read" : "")"
        case .flushClient(let upstream): return "flushClient\(upstream == nil ? "" : "+readUpstream")"
        case .readClient: return "readClient"
        case .readUpstream: return "readUpstream"
        case .closeClient: return "closeClient"
        }
    }

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
        let first = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/1", headers: ["Host": "plain.test"])
        let second = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/2", headers: ["Host": "plain.test"])
        guard case .route = machine.received(.head(first), now: now) else { Issue.record("route"); return }
        _ = machine.routed(first, RequestRouter.route(first, interception: interception, snapshot: Self.snapshot, maxHeadBytes: 65_536), now: now)
        _ = machine.received(.end(nil), now: now)
        #expect(Self.describe(machine.received(.head(second), now: now)) == "-")
        #expect(Self.describe(machine.received(.end(nil), now: now)) == "-")
        #expect(machine.nextQueuedPart() == nil, "nothing is taken while the first exchange runs")
        _ = machine.upstreamAcquired(upstream, reused: false, pinVerdict: nil, address: "x", authorization: .untouched, now: now)
        _ = machine.responseHead(HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "0"]), now: now)
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
