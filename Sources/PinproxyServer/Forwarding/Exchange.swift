import NIOCore
import NIOHTTP1
import PinproxyPolicy

/// One request/response exchange on a client connection, from its head to
/// the end of its response (or its refusal).
final class Exchange {
    enum Phase {
        /// Waiting for an upstream connection (pool, dial, TLS, pins).
        case connecting
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
        if case .forwarding(let connection) = phase { return connection }
        return nil
    }

    /// A request with no body can be sent again on a fresh connection.
    var replayable: Bool {
        bytesUp == 0 && requestEnded
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
