import Foundation
import NIOCore
import NIOHTTP1
import PinproxyMetrics
import Testing

@testable import PinproxyServer

/// The machine's own events for what the handler used to keep beside it:
/// the hold while a proxy credential is checked, the token's arrival or
/// failure and the 401 replay, and the end of a WebSocket splice. Each row:
/// the events that reach a state, that state, one event, the action it
/// gives and the state after. No I/O.
@Suite("Exchange state machine: authentication, token and splice events")
struct ExchangeStateMachineEventsTests {
    typealias Event = ExchangeStateMachineTests.Event
    typealias Machine = ExchangeStateMachineTests.Machine

    struct Row: CustomTestStringConvertible {
        var name: String
        var setup: [Event]
        var from: String
        var event: Event
        var action: String
        var to: String
        var host: String? = nil
        var testDescription: String { name }
    }

    static let webSocket: [Event] = [.head(.GET, "/ws", ExchangeStateMachineTests.webSocketHeaders), .end, .acquired(reused: false), .switching]
    static let withToken: [Event] = [.head(.GET, "/t", []), .end, .acquiredWithToken, .token]
    static let postAwaitingCredential = Event.headAwaitingCredential(.POST, "/p", [("Content-Length", "4")])

    static let rows: [Row] = [
        // The hold while the app's proxy credential is checked off the event loop.
        Row(name: "a head waits while its credential is checked", setup: [], from: "idle",
            event: postAwaitingCredential, action: "-", to: "authenticating"),
        Row(name: "a part that arrives meanwhile waits in the queue", setup: [postAwaitingCredential], from: "authenticating",
            event: .body(4), action: "-", to: "authenticating"),
        Row(name: "nothing more is read meanwhile", setup: [postAwaitingCredential, .body(4)], from: "authenticating",
            event: .readComplete, action: "-", to: "authenticating"),
        Row(name: "nothing is taken from the queue meanwhile", setup: [postAwaitingCredential, .body(4)], from: "authenticating",
            event: .takeQueued, action: "nothing queued", to: "authenticating"),
        Row(name: "the checked head is routed", setup: [postAwaitingCredential, .body(4), .end], from: "authenticating",
            event: .credentialChecked, action: "acquire", to: "acquiring"),
        Row(name: "then what waited comes from the queue, in order",
            setup: [postAwaitingCredential, .body(4), .end, .credentialChecked, .takeQueued], from: "acquiring",
            event: .takeQueued, action: "-", to: "acquiring"),
        Row(name: "the app leaves while its credential is checked", setup: [postAwaitingCredential], from: "authenticating",
            event: .clientLeft, action: "clientGone(-)", to: "closed"),
        Row(name: "a check that comes back after the app left routes nothing",
            setup: [postAwaitingCredential, .clientLeft], from: "closed",
            event: .credentialChecked, action: "not authenticating", to: "closed"),
        Row(name: "shutdown while a credential is checked: the request is answered first", setup: [postAwaitingCredential],
            from: "authenticating", event: .shutdown, action: "-", to: "authenticating"),
        Row(name: "a malformed request meanwhile: 400, and the connection closes", setup: [postAwaitingCredential],
            from: "authenticating", event: .malformed, action: "refuse(400 bad_request close log=400 nothing)", to: "closed"),

        // The token.
        Row(name: "the token arrives: the head goes up with it", setup: [.head(.GET, "/t", []), .end, .acquiredWithToken],
            from: "authorizing token=fetching(app)", event: .token, action: "send(GET parts=1 auth=Bearer T0KEN)",
            to: "forwarding token=app#7"),
        Row(name: "no token sessions: 503, the held connection goes back as it is",
            setup: [.head(.GET, "/t", []), .end, .acquiredWithToken], from: "authorizing token=fetching(app)",
            event: .tokenFailed(.noSessions), action: "refuse(503 token_unavailable giveBack log=503 takeNext)", to: "idle"),
        Row(name: "the provider has no token: 503", setup: [.head(.GET, "/t", []), .end, .acquiredWithToken],
            from: "authorizing token=fetching(app)", event: .tokenFailed(.unavailable("accounts down")),
            action: "refuse(503 token_unavailable giveBack log=503 takeNext)", to: "idle"),
        Row(name: "the credential's 429 window is open: 429, nothing goes up",
            setup: [.head(.GET, "/t", []), .end, .acquiredWithToken], from: "authorizing token=fetching(app)",
            event: .tokenFailed(.throttled(seconds: 30)), action: "refuse(429 upstream_throttled giveBack log=429 takeNext)", to: "idle"),
        Row(name: "a token failure with no fetch under way changes nothing", setup: [.head(.GET, "/g", []), .end, .acquired(reused: false)],
            from: "forwarding", event: .tokenFailed(.noSessions), action: "-", to: "forwarding"),
        Row(name: "a 401 to the token: its generation goes, the 401 is swallowed", setup: withToken,
            from: "forwarding token=app#7", event: .responseHead(401, keepAlive: true), action: "invalidate(app#7)",
            to: "discardingRefusal token=app#7"),
        Row(name: "the swallowed 401 ends: the request is acquired again, without a token",
            setup: withToken + [.responseHead(401, keepAlive: true)], from: "discardingRefusal token=app#7",
            event: .responseEnd, action: "reacquire(reuse)", to: "acquiring"),
        Row(name: "a second 401 goes to the app",
            setup: withToken + [.responseHead(401, keepAlive: true), .responseEnd, .acquiredWithToken, .token],
            from: "forwarding token=app#7", event: .responseHead(401, keepAlive: true), action: "responseHead(401)",
            to: "forwarding token=app#7"),
        Row(name: "a body beyond the replay limit: the 401 goes to the app",
            setup: [.head(.POST, "/big", [("Content-Length", "70000")]), .body(70_000), .end, .acquiredWithToken, .token],
            from: "forwarding token=app#7", event: .responseHead(401, keepAlive: true), action: "responseHead(401)",
            to: "forwarding token=app#7"),
        Row(name: "a 429 to a request that carried a credential opens its window", setup: withToken,
            from: "forwarding token=app#7", event: .responseHead(429, keepAlive: true), action: "responseHead(429 throttles=app)",
            to: "forwarding token=app#7"),
        Row(name: "a 429 to a request without a credential opens none", setup: [.head(.GET, "/g", []), .end, .acquired(reused: false)],
            from: "forwarding", event: .responseHead(429, keepAlive: true), action: "responseHead(429)", to: "forwarding"),

        // The end of a WebSocket splice.
        Row(name: "the 101's end: the exchange waits while spliced", setup: webSocket, from: "switching",
            event: .responseEnd, action: "splice(log=101)", to: "spliced"),
        Row(name: "the splice ends: the exchange's line", setup: webSocket + [.responseEnd], from: "spliced",
            event: .spliceEnded(up: 3, down: 4), action: "finish(log=101 nothing)", to: "closed"),
        Row(name: "the splice could not be set up: the upstream is discarded, the line says why", setup: webSocket + [.responseEnd],
            from: "spliced", event: .spliceFailed(.upstreamClosed), action: "abandonSplice(log=101 upstream_closed)", to: "closed"),
        Row(name: "the app leaves before the splice is set up: the setup says so", setup: webSocket + [.responseEnd],
            from: "spliced", event: .clientLeft, action: "-", to: "spliced"),
        Row(name: "which it does, once", setup: webSocket + [.responseEnd, .clientLeft], from: "spliced",
            event: .spliceFailed(.clientClosed), action: "abandonSplice(log=101 client_closed)", to: "closed"),
        Row(name: "a splice's end before the 101's end changes nothing", setup: webSocket, from: "switching",
            event: .spliceEnded(up: 1, down: 1), action: "-", to: "switching"),
        Row(name: "nothing after the splice's end", setup: webSocket + [.responseEnd, .spliceEnded(up: 1, down: 1)], from: "closed",
            event: .spliceFailed(.clientClosed), action: "-", to: "closed"),
    ]

    @Test(arguments: rows)
    func row(_ row: Row) {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        let upstream = ExchangeStateMachineTests.Upstream()
        let host = row.host ?? ((row.setup + [row.event]).contains {
            if case .acquiredWithToken = $0 { return true } else { return false }
        } ? "token.test" : "plain.test")
        _ = ExchangeStateMachineTests.run(row.setup, host: host, machine: &machine, upstream: upstream)
        #expect(ExchangeStateMachineTests.describe(machine.state) == row.from, "before: \(row.name)")
        let action = ExchangeStateMachineTests.run([row.event], host: host, machine: &machine, upstream: upstream)
        #expect(action == [row.action], "\(row.name)")
        #expect(ExchangeStateMachineTests.describe(machine.state) == row.to, "after: \(row.name)")
    }

    @Test func partsThatWaitedForTheCredentialGoUpWithTheHeadInOrder() {
        let actions = ExchangeStateMachineTests.run([
            Self.postAwaitingCredential, .body(3), .body(1), .end, .credentialChecked,
            .takeQueued, .takeQueued, .takeQueued, .takeQueued, .acquired(reused: false),
        ])
        #expect(actions == ["-", "-", "-", "-", "acquire", "-", "-", "-", "nothing queued", "send(POST parts=3 cl=4)"])
    }

    @Test func aThrottledCredentialsRefusalSaysWhenToComeBack() {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        _ = ExchangeStateMachineTests.run([.head(.GET, "/t", []), .end, .acquiredWithToken], host: "token.test", machine: &machine)
        guard case .authorizing(_, _, let upstream) = machine.state else { Issue.record("authorizing"); return }
        guard case .refuse(let error, _, true, _, _, _) = machine.tokenFailed(.throttled(seconds: 30), for: upstream) else {
            Issue.record("a refusal that gives the connection back"); return
        }
        #expect(error.code == .upstreamThrottled)
        #expect(error.retryAfterSeconds == 30)
        #expect(error.detail.contains("credential app"))
    }

    @Test func theSplicesLineCountsTheBytesRelayedEachWay() {
        var machine = Machine(idleTimeout: .seconds(2), acceptsConnect: false)
        _ = ExchangeStateMachineTests.run(Self.webSocket + [.responseEnd], machine: &machine)
        guard case .finish(let exchange, .nothing) = machine.spliceEnded(bytesUp: 300, bytesDown: 4_000) else {
            Issue.record("the splice's end finishes the exchange"); return
        }
        #expect(exchange.status == 101)
        #expect(exchange.bytesUp == 300)
        #expect(exchange.bytesDown == 4_000)
        #expect(exchange.failure == nil)
    }

    @Test(arguments: [
        (ExchangeFailure.upstreamClosed, "upstream_closed", ResponseCutReason.upstreamClosed),
        (.upstreamTimeout, "upstream_timeout", .upstreamTimeout),
        (.spliceNotSetUp(.clientClosed), "client_closed", .other),
        (.spliceNotSetUp(.noHTTP1Layers), "no HTTP/1.1 layers to splice", .other),
    ] as [(ExchangeFailure, String, ResponseCutReason)])
    func aFailureBecomesTextOnlyWhereItLeaves(failure: ExchangeFailure, text: String, reason: ResponseCutReason) {
        #expect(failure.text == text)
        #expect(failure.cutReason == reason)
    }
}
