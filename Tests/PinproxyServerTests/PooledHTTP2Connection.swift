import NIOCore
import NIOEmbedded
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// The real pool with one HTTP/2 upstream connection in it, over an
/// `EmbeddedChannel`: the first request's permit was granted and its dial
/// opened the connection, which carries that request's stream (counted).
/// The connection's SETTINGS and GOAWAY reach the pool as a dialled one's do.
struct PooledHTTP2Connection {
    let proxy: EmbeddedProxy
    let plan: DialPlan
    let pool: UpstreamPool
    let checkout: UpstreamCheckout
    let channel: EmbeddedChannel
    let connection: UpstreamConnection

    init() throws {
        proxy = try EmbeddedProxy()
        let policy = try #require(proxy.services.store.snapshot.policy(forHost: "intercept.test"))
        plan = DialPlan(host: "intercept.test", port: 443, tls: true, policy: policy)
        pool = UpstreamPool()
        checkout = UpstreamCheckout(pool: pool, connector: proxy.services.connector, instrumentation: proxy.services.instrumentation)
        channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let multiplexer = try UpstreamHTTP2Pipeline.configure(channel, ready: channel.eventLoop.makePromise())
        guard case .ready(.permit) = pool.acquireNow(plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true,
                                                    on: channel.eventLoop) else {
            throw Unexpected.notAPermit
        }
        connection = UpstreamConnection(channel: channel, key: plan.poolKey, multiplexer: multiplexer, pinEvaluation: nil, handshake: nil)
        pool.opened(connection)
        multiplexer.handler.onCapacity = { [pool, connection] capacity in pool.streamCapacityChanged(connection, to: capacity) }
    }

    /// A stream on the connection, whose room is counted already.
    func openStream() throws -> UpstreamConnection {
        var opened: Result<UpstreamCheckout.CheckedOut, any Error>?
        checkout.openStream(on: connection, policy: plan.policy) { opened = $0 }
        channel.embeddedEventLoop.run()
        return try #require(opened).get().connection
    }

    /// A stream the pool leases on the connection, opened.
    func leaseStream() throws -> UpstreamConnection {
        guard case .ready(.stream(let leased)) = pool.acquireNow(plan.poolKey, limit: 1, queueTimeout: .seconds(1), mayMultiplex: true,
                                                                 on: channel.eventLoop), leased === connection else {
            throw Unexpected.notAStream
        }
        return try openStream()
    }

    /// A frame on the connection as NIO's HTTP/2 handler passes it on.
    func connectionFrame(_ payload: HTTP2Frame.FramePayload) throws {
        try channel.pipeline.syncOperations.context(handlerType: NIOHTTP2Handler.self)
            .fireChannelRead(NIOAny(HTTP2Frame(streamID: 0, payload: payload)))
    }

    /// A place in line that a test did not expect, let run out (a
    /// promise left pending would be reported as leaked).
    func expire(_ acquired: UpstreamPool.Acquired) {
        guard case .queued(let future) = acquired else { return }
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        _ = try? future.wait()
    }

    func finish() {
        channel.embeddedEventLoop.run()
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    enum Unexpected: Error { case notAPermit, notAStream }
}
