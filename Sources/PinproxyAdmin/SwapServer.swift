import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PinproxyMetrics
import PinproxyPolicy
import PinproxySpotify
import ServiceLifecycle

/// The token swap listener (docs/contract.md §3 `spotify.swap`, §7 "Token swap"): plain
/// HTTP on `spotify.swap.listen`, `POST /swap` and `POST /refresh`, per-client
/// rate limits, `swap_requests_total{endpoint,result}`. Tokens, codes and
/// secrets are never logged: only endpoints, statuses and outcomes.
public struct SwapServer: Service {
    public let listen: HostPort
    let swap: TokenSwap
    let limiter: SwapRateLimiter
    let metrics: PinproxyMetrics
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    private let bound = BoundAddress()

    public init(listen: HostPort, swap: TokenSwap, metrics: PinproxyMetrics, limiter: SwapRateLimiter = SwapRateLimiter(),
                eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                logger: Logger = Logger(label: "pinproxy.swap")) {
        self.listen = listen
        self.swap = swap
        self.limiter = limiter
        self.metrics = metrics
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    /// The address actually bound (the real port when `listen` asked for 0).
    public var boundAddress: HostPort {
        get async throws { try await bound.value }
    }

    /// Forms are small: a code or a refresh token.
    static let maxBody = 16 * 1024

    struct Context: RequestContext, RemoteAddressRequestContext {
        var coreContext: CoreRequestContextStorage
        let remoteAddress: SocketAddress?

        init(source: ApplicationRequestContextSource) {
            coreContext = .init(source: source)
            remoteAddress = source.channel.remoteAddress
        }
    }

    func makeRouter() -> Router<Context> {
        let router = Router(context: Context.self)
        router.post("/swap") { request, context in
            await handle(.swap, request, context) { await swap.swap(form: $0) }
        }
        router.post("/refresh") { request, context in
            await handle(.refresh, request, context) { await swap.refresh(form: $0) }
        }
        return router
    }

    private func handle(_ endpoint: SwapEndpoint, _ request: Request, _ context: Context,
                        _ answer: @Sendable ([(String, String)]) async -> TokenSwap.Answer) async -> Response {
        let client = context.remoteAddress?.ipAddress ?? "unknown"
        if case .limited(let retryAfter) = limiter.take(client: client) {
            metrics.swapRequest(endpoint: endpoint, result: .rateLimited)
            return Self.response(429, [("Content-Type", "application/json"), ("Retry-After", String(retryAfter))],
                                 Array(#"{"error":"rate_limited"}"#.utf8))
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maxBody)
        } catch {
            metrics.swapRequest(endpoint: endpoint, result: .badRequest)
            return Self.response(413, [("Content-Type", "application/json")], Array(#"{"error":"invalid_request"}"#.utf8))
        }
        let form = FormEncoding.decode(Array(buffer: body))
        let result = await answer(form)
        metrics.swapRequest(endpoint: endpoint, result: SwapResult(rawValue: result.outcome.rawValue) ?? .unavailable)
        logger.info("token swap request", metadata: [
            "endpoint": "\(endpoint.rawValue)", "status": "\(result.status)", "result": "\(result.outcome.rawValue)",
        ])
        return Self.response(result.status, result.headers, result.body)
    }

    static func response(_ status: Int, _ headers: [(String, String)], _ body: [UInt8]) -> Response {
        var fields = HTTPFields()
        // The only headers a swap answer carries (Spotify's other headers are not passed on).
        for (name, value) in headers {
            switch name.lowercased() {
            case "content-type": fields[.contentType] = value
            case "retry-after": fields[.retryAfter] = value
            default: continue
            }
        }
        fields[.cacheControl] = "no-store"
        return Response(status: HTTPResponse.Status(code: status), headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    public func run() async throws {
        let app = Application(
            router: makeRouter(),
            configuration: ApplicationConfiguration(address: .hostname(listen.host, port: listen.port)),
            onServerRunning: { [bound, listen, logger] channel in
                let address = HostPort(host: listen.host, port: channel.localAddress?.port ?? listen.port)
                logger.info("token swap listening", metadata: ["address": "\(address)"])
                bound.resolve(address)
            },
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: Self.frameworkLogger(logger))
        do {
            try await app.run()
        } catch where !bound.isBound {
            bound.fail(SwapServerError.bindFailed(address: listen, underlying: "\(error)"))
            throw SwapServerError.bindFailed(address: listen, underlying: "\(error)")
        }
        bound.fail(AdminServerError.stopped)
    }
}

public enum SwapServerError: Error, Sendable, CustomStringConvertible {
    case bindFailed(address: HostPort, underlying: String)

    public var description: String {
        switch self {
        case .bindFailed(let address, let underlying): return "token swap cannot listen on \(address): \(underlying)"
        }
    }
}
