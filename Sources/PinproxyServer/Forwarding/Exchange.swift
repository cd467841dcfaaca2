import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// One request/response exchange on a client connection, from its head to
/// the end of its response (or its refusal).
final class Exchange {
    enum Phase {
        /// Waiting for an upstream connection (pool, dial, TLS, pins).
        case connecting
        /// An upstream connection is held while the bearer token is fetched.
        /// Nothing has been written to it: body parts still wait in `pending`,
        /// so no byte of a request can reach the upstream before its head.
        case authorizing(UpstreamConnection)
        /// Request and response are streaming.
        case forwarding(UpstreamConnection)
        /// The response is complete; the rest of the request body is dropped.
        case draining
        /// A refusal was sent; the rest of the request body is dropped.
        case refused
    }

    var phase: Phase = .connecting
    let request: HTTPRequestHead
    let started = NIODeadline.now()
    /// The policy that decided (nil: none matched), and the host asked for.
    var policy: HostPolicy?
    var host: String
    var mode: String
    var plan: DialPlan?
    var upstreamHead: HTTPRequestHead?
    /// How the request body is delimited, decided from the client's head.
    var framing: RequestFraming = .none
    /// Parts received before the upstream connection was ready.
    var pending: [HTTPServerRequestPart] = []

    var requestEnded = false
    var responseStarted = false
    var status: Int?
    var bytesUp = 0
    var bytesDown = 0
    var closeAfter: Bool
    /// When `response_timeout` runs out (checked by the event loop's `DeadlineSweeper`).
    var responseDeadline: NIODeadline?
    /// When a request body that stopped arriving is cut (`idle_timeout` after
    /// its last byte); nil once the request has ended or when it has no body.
    var bodyDeadline: NIODeadline?
    /// What went wrong after the response head reached the app
    /// (`upstream_closed`, `upstream_timeout`): the access line's `error`.
    var failure: String?
    /// The connection came from the pool (a stale one may be retried once).
    var reusedConnection = false
    var retried = false
    var pinVerdict: String?
    var upstreamAddress: String?
    var error: ProxyError?
    /// The token attached to this request (its generation), for a 401's invalidation.
    var tokenGeneration: Int?
    /// The request body, kept while it is small enough to send again after a 401
    /// (DESIGN §10: 64 KiB); nil once it is not.
    var replayBody: [ByteBuffer]? = []
    var replayBodyBytes = 0
    /// The one replay after a 401 has been used.
    var replayedAfter401 = false
    /// A 401 is being swallowed before the replay.
    var discardingResponse = false
    static let replayLimit = 64 * 1024

    /// A CONNECT that passed its checks; carried out when its head is complete.
    var connect: ConnectDecision?

    init(request: HTTPRequestHead, host: String, mode: String, closeAfter: Bool) {
        self.request = request
        self.host = host
        self.mode = mode
        self.closeAfter = closeAfter
    }

    var upstream: UpstreamConnection? {
        switch phase {
        case .authorizing(let connection), .forwarding(let connection): return connection
        case .connecting, .draining, .refused: return nil
        }
    }

    /// Whether a request that a reused connection lost may be sent again on
    /// a fresh one. Its head went out, so the upstream may have acted on it:
    /// only an idempotent request without a body qualifies (RFC 9110 §9.2.2),
    /// and only when the connection closed without a byte of answer. A POST
    /// is never sent twice.
    func retryableAfterLoss(_ error: (any Error)?) -> Bool {
        guard reusedConnection, !retried, requestEnded, bytesUp == 0, !responseStarted else { return false }
        if error is HTTPParserError { return false }  // stray bytes: the upstream said something
        switch request.method {
        case .GET, .HEAD, .OPTIONS, .PUT, .DELETE: return true
        default: return false
        }
    }

    /// The policy's pattern, or `_none`: the log's and metrics' name for it.
    var policyLabel: String { policy?.metricLabel ?? "_none" }

    var elapsedSeconds: Double {
        Double((NIODeadline.now() - started).nanoseconds) / 1e9
    }
}

/// What a CONNECT turns into.
struct ConnectDecision {
    enum Action {
        case tunnel
        case intercept(HostPolicy)
    }

    var host: String
    var port: Int
    var action: Action
}
