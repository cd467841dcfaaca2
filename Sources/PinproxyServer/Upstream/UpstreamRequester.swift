import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PinproxyPolicy

/// A whole response, collected (small replies only: token endpoints).
struct CollectedResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
}

/// One request sent by pinproxy itself (not on behalf of a client) through
/// the same path as client traffic: the host's policy, pins, SSRF guard and
/// pool. The Spotify token request goes this way, so the accounts host's
/// pins protect the client secret.
final class UpstreamRequester: Sendable {
    let services: ProxyServices
    /// The proxy's own event loops: pinproxy's requests share them with the app's.
    let group: any EventLoopGroup
    /// Bodies larger than this are refused (a token reply is a few hundred bytes).
    let maxBody = 1 << 20

    init(services: ProxyServices, group: any EventLoopGroup) {
        self.services = services
        self.group = group
    }

    func send(_ head: HTTPRequestHead, body: [UInt8], to url: AbsoluteTarget, timeout: TimeAmount) -> EventLoopFuture<CollectedResponse> {
        let loop = group.next()
        let host = Authority.normalize(url.authority.host)
        let port = url.authority.port ?? url.defaultPort
        let snapshot = services.store.snapshot
        guard let policy = snapshot.policy(forHost: host), policy.spec.action != .deny else {
            return loop.makeFailedFuture(ProxyError(.hostDenied, host: host,
                detail: "no policy allows \(host): pinproxy sends its own requests only under a host policy (add one for \(host))"))
        }
        let tls = url.scheme == "https" || policy.spec.upgradeToTLS
        let plan = DialPlan(host: host, port: port, tls: tls, policy: policy)
        let services = self.services
        return services.upstreams.checkout(plan, on: loop)
            .map(\.connection)
            .flatMap { connection in
                // A token must only travel over a connection whose pins matched (or
                // whose mismatch is inside a declared transition window).
                if let verdict = connection.pinVerdict, !verdict.permitsTokenAttachment(attachUnpinned: false) {
                    services.pool.release(connection)
                    return loop.makeFailedFuture(ProxyError(.pinMismatch, host: host,
                        detail: "the pins of \(host) did not match (\(verdict.metricLabel)): pinproxy sends it no secret"))
                }
                let collector = ResponseCollector(connection: connection, pool: services.pool, maxBody: self.maxBody, host: host, loop: loop)
                return collector.exchange(head, body: body, timeout: timeout)
            }
    }
}

/// Receives one response on a borrowed connection and gives the connection back.
private final class ResponseCollector: UpstreamResponseReceiver, @unchecked Sendable {
    private let connection: UpstreamConnection
    private let pool: UpstreamPool
    private let maxBody: Int
    private let host: String
    private let promise: EventLoopPromise<CollectedResponse>
    private var status = 0
    private var headers: [(String, String)] = []
    private var body: [UInt8] = []
    private var done = false

    init(connection: UpstreamConnection, pool: UpstreamPool, maxBody: Int, host: String, loop: any EventLoop) {
        self.connection = connection
        self.pool = pool
        self.maxBody = maxBody
        self.host = host
        self.promise = connection.channel.eventLoop.makePromise()
    }

    func exchange(_ head: HTTPRequestHead, body: [UInt8], timeout: TimeAmount) -> EventLoopFuture<CollectedResponse> {
        let loop = connection.channel.eventLoop
        var framed = head
        RequestFraming.length(UInt64(body.count)).apply(to: &framed.headers)
        let sent = framed
        loop.execute {
            self.connection.receiver = self
            self.connection.write(.head(sent))
            if !body.isEmpty { self.connection.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
            self.connection.write(.end(nil))
            self.connection.flush()
            self.connection.read()
        }
        let timer = loop.scheduleTask(in: timeout) {
            self.finish(.failure(ProxyError(.upstreamTimeout, host: self.host, detail: "no answer from \(self.host) within \(timeout.seconds) s")), reusable: false)
        }
        return promise.futureResult.always { _ in timer.cancel() }
    }

    private func finish(_ result: Result<CollectedResponse, any Error>, reusable: Bool) {
        guard !done else { return }
        done = true
        connection.receiver = nil
        if !reusable { connection.reusable = false }
        pool.release(connection)
        promise.completeWith(result)
    }

    func upstreamReceived(_ part: UpstreamResponsePart) {
        switch part {
        case .head(let received):
            let head = received.head
            guard head.status.code >= 200 else { return }  // informational
            status = Int(head.status.code)
            headers = head.headers.map { ($0.name, $0.value) }
            if !head.isKeepAlive { connection.reusable = false }
        case .body(let buffer):
            body += buffer.readableBytesView
            if body.count > maxBody {
                finish(.failure(ProxyError(.connectFailed, host: host, detail: "the answer from \(host) is larger than \(maxBody) bytes")), reusable: false)
            }
        case .end:
            finish(.success(CollectedResponse(status: status, headers: headers, body: body)), reusable: true)
        }
    }

    func upstreamReadComplete() {
        if !done { connection.read() }
    }

    func upstreamWritabilityChanged() {}

    func upstreamClosed(_ error: (any Error)?) {
        let detail = error.map { "\(host) failed before answering: \(UpstreamConnector.describe($0))" } ?? "\(host) closed the connection before answering"
        finish(.failure(ProxyError(.connectFailed, host: host, detail: detail)), reusable: false)
    }
}
