import Foundation
import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// The driver of the exchange machine's tables: events in, each action
/// (and state) described as a short string.
extension ExchangeStateMachineTests {
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
        /// A head whose proxy credential is checked off the event loop (`authenticationPending`).
        case headAwaitingCredential(HTTPMethod, String, [(String, String)])
        /// The credential check of that head came back: it is routed.
        case credentialChecked
        /// The handler takes the next queued part, if the machine gives one ("nothing queued").
        case takeQueued
        case shutdown
        case malformed
        case tokenFailed(TokenFailure)
        case spliceEnded(up: Int, down: Int)
        case spliceFailed(SpliceFailure)
    }

    /// Drives a machine through `events` and returns each action, described.
    static func run(_ events: [Event], host: String? = nil, machine: inout Machine, upstream: Upstream = Upstream()) -> [String] {
        // Scenarios that attach a token run under the policy that names a session.
        let host = host ?? (events.contains { if case .acquiredWithToken = $0 { return true } else { return false } } ? "token.test" : "plain.test")
        let interception = RequestRouter.Interception(host: host, port: 443, policy: snapshot.policy(forHost: host)!)
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var out: [String] = []
        for event in events {
            var action: Machine.Action
            switch event {
            case .head(let method, let uri, let headers):
                // As the app's HTTP/1.1 leg hands it on: its bytes, read by the head path.
                let head = AppRequestHead.read(HTTPRequestHead(version: .http1_1, method: method, uri: uri,
                                                               headers: HTTPHeaders((headers.contains { $0.0 == "Host" } ? [] : [("Host", host)]) + headers)))
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
                action = machine.upstreamAcquired(upstream, reused: reused, pin: nil, address: "127.0.0.1:1",
                                                  authorization: .untouched, now: now)
            case .acquiredWithToken:
                action = machine.upstreamAcquired(upstream, reused: true, pin: nil, address: "127.0.0.1:1",
                                                  authorization: .attach(session: "app"), now: now)
            case .acquireFailed(let error):
                action = machine.upstreamFailed(error)
            case .token:
                action = machine.tokenArrived("T0KEN", generation: TokenGeneration(rawValue: 7), for: upstream, now: now)
            case .responseHead(let status, let keepAlive):
                var headers = HTTPHeaders([("Content-Length", "10")])
                if !keepAlive { headers.add(name: "Connection", value: "close") }
                action = machine.responseHead(.http1(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers)), now: now)
            case .switching:
                let headers = HTTPHeaders([("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "abc=")])
                action = machine.responseHead(.http1(HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers)), now: now)
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
            case .headAwaitingCredential(let method, let uri, let headers):
                let head = AppRequestHead.read(HTTPRequestHead(version: .http1_1, method: method, uri: uri, headers: HTTPHeaders([("Host", host)] + headers)))
                action = machine.received(.head(head), now: now)
                if case .route(let routed) = action {
                    machine.authenticationPending(routed)
                    action = .none
                }
            case .credentialChecked:
                guard case .authenticating(let head) = machine.state else {
                    out.append("not authenticating")
                    continue
                }
                let decision = RequestRouter.route(head, interception: interception, snapshot: snapshot, maxHeadBytes: 65_536)
                action = machine.routed(head, decision, now: now)
            case .takeQueued:
                guard let part = machine.nextQueuedPart() else {
                    out.append("nothing queued")
                    continue
                }
                action = machine.received(part, now: now)
            case .shutdown:
                action = machine.shutdownRequested()
            case .malformed:
                action = machine.parserFailed(ProxyError(.badRequest, host: nil, detail: "malformed HTTP request"), now: now)
            case .tokenFailed(let failure):
                action = machine.tokenFailed(failure, for: upstream)
            case .spliceEnded(let up, let down):
                action = machine.spliceEnded(bytesUp: up, bytesDown: down)
            case .spliceFailed(let reason):
                action = machine.spliceFailed(reason)
            }
            out.append(describe(action))
        }
        return out
    }

    /// The machine's state, named as the tables name it; the token's stage
    /// where one is in play.
    static func describe(_ state: Machine.State) -> String {
        func token(_ exchange: Exchange) -> String {
            switch exchange.token {
            case .none: return ""
            case .fetching(let placement): return " token=fetching(\(placement.credential))"
            case .attached(let placement, let generation): return " token=\(placement.credential)#\(generation.rawValue)"
            }
        }
        switch state {
        case .idle: return "idle"
        case .authenticating: return "authenticating"
        case .acquiring(let exchange, _): return "acquiring" + token(exchange)
        case .authorizing(let exchange, _, _): return "authorizing" + token(exchange)
        case .forwarding(let exchange, _, _): return "forwarding" + token(exchange)
        case .discardingRefusal(let exchange, _, _): return "discardingRefusal" + token(exchange)
        case .responded: return "responded"
        case .refused: return "refused"
        case .switching: return "switching"
        case .spliced: return "spliced"
        case .handedOver: return "handedOver"
        case .closed: return "closed"
        case .modifying: return "modifying"
        }
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
        case .fetchToken(let credential, _, _, _): return "fetchToken(\(credential))"
        case .sendRequest(let route, let pending, _, let flush, let readClient):
            let head = route.upstreamHead.whole
            let auth = head.headers["authorization"].first.map { " auth=\($0)" } ?? ""
            let framing = head.headers["content-length"].first.map { " cl=\($0)" } ?? (head.headers["transfer-encoding"].first.map { " te=\($0)" } ?? "")
            let upgrade = head.headers["upgrade"].first.map { " upgrade=\($0) connection=\(head.headers["connection"].joined(separator: ","))" } ?? ""
            return "send(\(head.method) parts=\(pending.count)\(framing)\(auth)\(upgrade)\(flush ? " flush" : "")\(readClient ? " read" : ""))"
        case .forwardBody(let body, _): return "forwardBody(\(body.readableBytes))"
        case .forwardEnd: return "forwardEnd"
        case .writeInformational(let head): return "informational(\(head.status.code))"
        case .writeResponseHead(let client, let throttles):
            let head = client.whole
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
}

extension UpstreamResponseHead {
    /// An HTTP/1.1 upstream's head as the head path hands it on: `head`
    /// written out, then read by `HeadParser`.
    static func http1(_ head: HTTPResponseHead) -> UpstreamResponseHead {
        var text = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for (name, value) in head.headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return ByteBuffer(string: text).withUnsafeReadableBytes { bytes in
            guard case .head(let parsed) = HeadParser(kind: .response, maxFieldBytes: 80 * 1024, maxFieldCount: 100).parse(bytes) else {
                preconditionFailure("not a head: \(text)")
            }
            return UpstreamResponseHead(parsed, in: bytes)
        }
    }
}
