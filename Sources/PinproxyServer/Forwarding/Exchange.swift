import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyMetrics
import PinproxyPolicy

/// One request and its response, as `ExchangeStateMachine` tracks it: what
/// the app asked, what routing decided, and how far each direction got.
/// It lives inside the machine's state and is handed out whole for the
/// access line when the exchange ends. A class, not a value: the machine
/// moves it from state to state eight or so times a request, and a value
/// with this many references inside costs a retain and a release for each
/// of them at every move (measured: about 3% of a keep-alive request's CPU).
/// Only the machine changes it, and once handed out for the access line it
/// is no longer in any state.
final class Exchange {
    let method: HTTPMethod
    /// The request target as the app sent it (the access line drops the query).
    let target: String
    let started: NIODeadline
    /// The host asked for, and the policy that decided (nil: none matched).
    var host: String
    var policy: HostPolicy?
    /// The client's identity (nil: anonymous), for the access line and the `client` label.
    var identity: String?
    /// The route's `response_timeout` (the default for a request refused
    /// before it had a route). The route itself travels in the machine's
    /// states that need it.
    let responseTimeout: TimeAmount
    /// How the request body is delimited (nil: ambiguous, and refused).
    var framing: RequestFraming?
    /// The connection ends with this exchange (the app asked, a refusal, shutdown).
    var closeAfter: Bool

    /// How far the app's request got.
    var request: RequestSide = .streaming
    var requestEnded: Bool { request == .ended }
    /// Parts read before the head could go up (no upstream yet, or a token
    /// being fetched): nothing of a request reaches the upstream before its head.
    var pending = PendingParts()
    var bytesUp = 0
    var bytesDown = 0
    var status: Int?
    /// How far the response to the app got.
    var response: ResponseSide = .notStarted
    /// Something went to the app: a refusal can no longer take its place.
    var responseStarted: Bool { response != .notStarted }
    /// Whether the upstream connection may serve another request afterwards.
    var upstreamReusable = true

    /// The connection came from the pool, and whether the one retry after a
    /// lost connection has been used.
    var reused = false
    var retried = false

    /// The body kept for the one replay after a 401 to a token.
    var replay: Replay = .unavailable
    /// The bearer token: none, being fetched, or attached (its generation is
    /// what a 401 invalidates).
    var token: TokenStage = .none

    /// The pin verdict's label for the access line (`PinVerdict.metricLabel`):
    /// the label alone, a static string, where the verdict itself would be
    /// copied in and out with the policy's pin strings inside it.
    var pin: String?
    var upstreamAddress: String?
    /// The refusal sent, if any (its code is the access line's `error`).
    var error: ProxyError?
    /// What went wrong after the response head reached the app.
    var failure: ExchangeFailure?

    /// When a request body that stopped arriving is cut (`idle_timeout`).
    var bodyDeadline: NIODeadline?
    /// When the wait for the upstream (head, or the next body read) ends.
    var responseDeadline: NIODeadline?

    /// `decision` is borrowed: an initializer's parameters are otherwise
    /// taken owned, and the machine, which goes on reading the decision,
    /// copied it whole to hand it over (its policy retained, once a request).
    init(head: AppRequestHead, decision: borrowing RoutingDecision, started: NIODeadline, closeAfter: Bool) {
        self.method = head.method
        self.target = head.uri
        self.started = started
        self.host = decision.host
        self.policy = decision.policy
        self.closeAfter = closeAfter || decision.closeAfter
        self.framing = decision.framing
        self.identity = decision.identity
        if case .success(let route) = decision.result {
            self.responseTimeout = route.responseTimeout
            // Kept so that a 401 can be answered by a replay with a fresh token.
            if decision.policy?.spec.auth != nil { replay = .keeping([], bytes: 0) }
        } else {
            self.responseTimeout = TimeAmount(HostPolicyDefaults.responseTimeout)
        }
    }

    /// The policy's pattern, or `_none`: the log's and metrics' name for it.
    var policyLabel: String { policy?.metricLabel ?? "_none" }

    /// Whether a request that a reused connection lost may be sent again on
    /// a fresh one. Its head went out, so the upstream may have acted on it:
    /// only an idempotent request without a body qualifies (RFC 9110 §9.2.2),
    /// and only when the connection closed without a byte of answer. A POST
    /// is never sent twice.
    func retryableAfterLoss(_ error: (any Error)?) -> Bool {
        guard reused, !retried, requestEnded, bytesUp == 0, !responseStarted else { return false }
        if error is HTTPParserError || error is MessageRefusal { return false }  // stray bytes: the upstream said something
        switch method {
        case .GET, .HEAD, .OPTIONS, .PUT, .DELETE: return true
        default: return false
        }
    }

}

/// The app's request inside an exchange, as far as it got.
enum RequestSide: Equatable {
    /// Its end has not arrived: body parts may follow (the framing bounds them).
    case streaming
    /// Its end arrived: what follows belongs to the next request.
    case ended
}

/// The response to the app inside an exchange, as far as it got.
enum ResponseSide: Equatable {
    /// Nothing went to the app yet: a refusal can still be sent.
    case notStarted
    /// The upstream's head went to the app. `bodyless`: its status (204,
    /// 304) or the request's method (HEAD) says it has no body, so bytes the
    /// upstream sends anyway are not passed on.
    case streaming(bodyless: Bool)
    /// The upstream sent a body with a response that cannot have one: it
    /// was dropped, the response ended there, and that upstream connection
    /// (or stream) is not used again.
    case droppedBody
    /// A refusal went to the app in the response's place.
    case refused
    /// The upstream's WebSocket `101` went to the app.
    case switched
}

/// What went wrong after the response head reached the app, when no
/// refusal could be sent; the access line's `error` then.
enum ExchangeFailure: Equatable {
    /// The upstream closed before the response was complete.
    case upstreamClosed
    /// `response_timeout` ran out between two reads of the response body.
    case upstreamTimeout
    /// The WebSocket `101` reached the app, but the splice could not be set up.
    case spliceNotSetUp(SpliceFailure)

    /// The access line's `error`.
    var text: String {
        switch self {
        case .upstreamClosed: return "upstream_closed"
        case .upstreamTimeout: return "upstream_timeout"
        case .spliceNotSetUp(let failure): return failure.text
        }
    }

    /// The `responses_cut_total` reason of a response cut short.
    var cutReason: ResponseCutReason {
        switch self {
        case .upstreamClosed: return .upstreamClosed
        case .upstreamTimeout: return .upstreamTimeout
        case .spliceNotSetUp: return .other
        }
    }
}

/// Why a WebSocket splice was not set up after its `101`.
enum SpliceFailure: Equatable {
    /// The app's connection closed (or the `101`'s end could not be written).
    case clientClosed
    case upstreamClosed
    /// The app's connection has no HTTP/1.1 layers to take out (an HTTP/2 stream).
    case noHTTP1Layers
    /// The pipelines could not be changed; the error's description.
    case pipeline(String)

    var text: String {
        switch self {
        case .clientClosed: return "client_closed"
        case .upstreamClosed: return "upstream_closed"
        case .noHTTP1Layers: return "no HTTP/1.1 layers to splice"
        case .pipeline(let description): return description
        }
    }
}

/// The request parts waiting for their head to go up first, in order: body
/// slices, then perhaps the end. The end is kept beside the slices, not in a
/// list with them: the common request (its head, then its end while an
/// upstream is found, as every HTTP/2 stream's) keeps no list, where one was
/// an allocation per stream (issue 33).
struct PendingParts {
    private(set) var bodies: [ByteBuffer] = []
    /// The end came (after `bodies`), with `trailers` if it had any.
    private(set) var ended = false
    private(set) var trailers: HTTPHeaders?

    /// The whole of a kept request: `bodies`, then its end without trailers.
    static func ended(after bodies: [ByteBuffer]) -> PendingParts {
        PendingParts(bodies: bodies, ended: true, trailers: nil)
    }

    mutating func append(_ body: ByteBuffer) {
        bodies.append(body)
    }

    mutating func end(_ trailers: HTTPHeaders?) {
        ended = true
        self.trailers = trailers
    }

    /// Parts waiting: each slice, and the end.
    var count: Int { bodies.count + (ended ? 1 : 0) }
}
