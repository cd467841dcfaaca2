import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyPolicy

/// One GET to pinproxy's admin API (plain HTTP on `admin.listen`), for the
/// operator commands that read a running pinproxy (`pins suggest`).
///
/// Why NIO and not `URLSession`: `FoundationNetworking` brings libcurl, and
/// behind it some twenty libraries (Kerberos, LDAP, SSH, RTMP), into every
/// pinproxy process, the proxy's included, for this one request; and the
/// container image, whose binary has the Swift runtime linked in, would
/// need them installed beside `libssl3` or fail to start.
enum AdminRequest {
    struct Response {
        var status: Int
        var body: ByteBuffer
    }

    /// Why no answer came, in the words `pins suggest` prints.
    enum Failure: Error {
        case refused
        case timedOut
        case unresolved
        case closedEarly
        case other(String)

        var reason: String {
            switch self {
            case .refused: return "nothing answers there (connection refused)"
            case .timedOut: return "no answer in time"
            case .unresolved: return "that host name does not resolve"
            case .closedEarly: return "the connection closed before a whole answer"
            case .other(let text): return text
            }
        }
    }

    /// The admin documents are small; anything larger is not pinproxy's.
    static let maxBodyBytes = 64 << 20

    /// `GET path` on `host:port`, the whole answer within `timeout`.
    static func get(host: String, port: Int, path: String, timeout: TimeAmount = .seconds(10)) async throws -> Response {
        let group = MultiThreadedEventLoopGroup.singleton
        let promise = group.next().makePromise(of: Response.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(AnswerCollector(promise: promise))
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            promise.fail(error)
            throw Failure(connecting: error, host: host, port: port)
        }
        let deadline = channel.eventLoop.scheduleTask(in: timeout) {
            promise.fail(Failure.timedOut)
            channel.close(promise: nil)
        }
        var headers = HTTPHeaders()
        let authority = PinproxyPolicy.HostPort.bracketed(host)
        headers.add(name: "Host", value: port == 80 ? authority : "\(authority):\(port)")
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)),
                      promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        do {
            return try await promise.futureResult.get()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.other("\(error)")
        }
    }
}

extension AdminRequest.Failure {
    /// A connection that never opened: a name with no address, refused, or
    /// timed out, in `pins suggest`'s words; anything else as `pin
    /// --connect` words it (`ConnectFailure`), not as NIO's nested errors.
    init(connecting error: any Error, host: String, port: Int) {
        let attempts = (error as? NIOConnectionError).map { $0.connectionErrors.map(\.error) } ?? [error]
        if error is NIOConnectionError, attempts.isEmpty {
            self = .unresolved
        } else if attempts.contains(where: { ($0 as? IOError)?.errnoCode == ECONNREFUSED }) {
            self = .refused
        } else if attempts.contains(where: { if case .connectTimeout = $0 as? ChannelError { true } else { false } }) {
            self = .timedOut
        } else {
            self = .other(ConnectFailure.describe(error, host: host, port: port))
        }
    }
}

/// Gathers one response: its status, and its body up to `AdminRequest.maxBodyBytes`.
private final class AnswerCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<AdminRequest.Response>
    private var status: Int?
    private var body = ByteBuffer()

    init(promise: EventLoopPromise<AdminRequest.Response>) {
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(var part):
            guard body.readableBytes + part.readableBytes <= AdminRequest.maxBodyBytes else {
                promise.fail(AdminRequest.Failure.other("an answer larger than \(AdminRequest.maxBodyBytes >> 20) MiB"))
                context.close(promise: nil)
                return
            }
            body.writeBuffer(&part)
        case .end:
            if let status { promise.succeed(AdminRequest.Response(status: status, body: body)) }
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(AdminRequest.Failure.closedEarly)  // ignored once the answer was whole
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(AdminRequest.Failure.other("\(error)"))
        context.close(promise: nil)
    }
}
