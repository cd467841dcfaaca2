import NIOCore
import PinproxyPolicy

/// Where a request gets its upstream connection: the pool's answer carried
/// out (an idle pooled connection, a stream on an HTTP/2 connection, a dial
/// under a new slot, or a place in line) and what each dial's outcome tells
/// the pool (opened, failed and how, closed, stream capacity).
final class UpstreamCheckout: Sendable {
    let pool: UpstreamPool
    let connector: UpstreamConnector
    let instrumentation: any ProxyInstrumentation

    init(pool: UpstreamPool, connector: UpstreamConnector, instrumentation: any ProxyInstrumentation) {
        self.pool = pool
        self.connector = connector
        self.instrumentation = instrumentation
    }

    typealias CheckedOut = (connection: UpstreamConnection, reused: Bool)

    /// An idle pooled connection at once, a stream to open on a pooled
    /// HTTP/2 connection of the asking loop, or one still to come (a dial, a
    /// stream on another loop's connection, a place in line).
    enum Checkout {
        case pooled(UpstreamConnection)
        /// Opened by `openStream(on:policy:then:)`, which tells its callback
        /// on this loop: no future, where a stream is an HTTP/2 request's
        /// common case (issue 33: a promise and a callback fewer per stream).
        case stream(UpstreamConnection)
        case pending(EventLoopFuture<CheckedOut>)
    }

    /// An upstream connection for `plan` on `loop`: an idle pooled one, or a
    /// new one dialled under a pool slot (the slot is returned if the dial fails).
    func checkout(_ plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<CheckedOut> {
        switch checkoutNow(plan, on: loop) {
        case .pooled(let connection): return loop.makeSucceededFuture((connection, true))
        case .stream(let connection): return openStream(on: connection, policy: plan.policy, reused: true)
        case .pending(let future): return future
        }
    }

    /// As `checkout`, with no future when an idle pooled connection is there
    /// (the keep-alive request's common case).
    func checkoutNow(_ plan: DialPlan, on loop: any EventLoop) -> Checkout {
        let policy = plan.policy
        // Only TLS negotiates HTTP/2 (ALPN); `upstream_protocol: http1` never offers it.
        let mayMultiplex = plan.tls && policy?.spec.upstreamProtocol != .http1 && !plan.requiresHTTP1
        let acquired = pool.acquireNow(
            plan.poolKey, limit: policy?.spec.maxUpstreamConnections ?? 64,
            queueTimeout: TimeAmount(policy?.spec.queueTimeout ?? .seconds(5)), mayMultiplex: mayMultiplex, on: loop)
        switch acquired {
        case .ready(.connection(let connection)):
            return .pooled(connection)
        case .ready(.stream(let connection)) where connection.channel.eventLoop === loop:
            return .stream(connection)
        case .ready(let lease):
            // A stream on another loop's HTTP/2 connection (at the limit) is opened there.
            return .pending(connection(for: lease, plan: plan, on: loop).hop(to: loop))
        case .queued(let future):
            return .pending(future.flatMap { self.connection(for: $0, plan: plan, on: loop) })
        }
    }

    /// What a lease comes to: the pooled connection itself, a stream on an
    /// HTTP/2 connection, or a new connection dialled under a permit.
    private func connection(for lease: UpstreamPool.Lease, plan: DialPlan, on loop: any EventLoop) -> EventLoopFuture<CheckedOut> {
        let policy = plan.policy
        switch lease {
        case .connection(let connection):
            return loop.makeSucceededFuture((connection, true))
        case .stream(let connection):
            return openStream(on: connection, policy: policy, reused: true)
        case .permit:
            return connector.connect(plan, on: loop).flatMap { connection in
                self.pool.opened(connection)
                self.instrumentation.upstreamConnections(policy: policy, delta: 1)
                connection.onClose = {
                    self.pool.closed(connection)
                    self.instrumentation.upstreamConnections(policy: policy, delta: -1)
                }
                if let multiplexer = connection.multiplexer {
                    multiplexer.handler.onCapacity = { [pool = self.pool] capacity in
                        pool.streamCapacityChanged(connection, to: capacity)
                    }
                    return self.openStream(on: connection, policy: policy, reused: false)
                }
                return loop.makeSucceededFuture((connection, false))
            }.flatMapError { error in
                // The request gets this refusal; the pool, the failure to back off from.
                self.pool.dialFailed(plan.poolKey, failure: UpstreamConnector.refusal(for: error, host: plan.host), on: loop)
                return loop.makeFailedFuture(error)
            }
        }
    }

    /// A stream on a pooled HTTP/2 connection (its place in the pool is counted
    /// already; given back if the stream cannot be opened), opened on the
    /// connection's loop (a request on another loop, which the pool lends to
    /// at its limit, gets it there).
    private func openStream(on connection: UpstreamConnection, policy: HostPolicy?, reused: Bool) -> EventLoopFuture<CheckedOut> {
        let loop = connection.channel.eventLoop
        guard loop.inEventLoop else { return loop.flatSubmit { self.openStream(on: connection, policy: policy, reused: reused) } }
        let checkedOut = loop.makePromise(of: CheckedOut.self)
        openStream(on: connection, policy: policy, reused: reused) { checkedOut.completeWith($0) }
        return checkedOut.futureResult
    }

    /// A stream on a pooled HTTP/2 connection of this loop (`Checkout.stream`),
    /// `then` told on this loop with it, or with why there is none.
    func openStream(on connection: UpstreamConnection, policy: HostPolicy?, reused: Bool = true,
                    then: @escaping (Result<CheckedOut, any Error>) -> Void) {
        let multiplexer = connection.multiplexer!
        // Resolved by the connection's first stream and kept for the rest: a
        // pooled connection serves only the key it was dialled for, and so
        // one policy (its digest is in the key).
        let recorder = multiplexer.streamRecorder ?? self.instrumentation.trafficRecorder(policy: policy)
        multiplexer.streamRecorder = recorder
        multiplexer.openStream(on: connection) { result in
            switch result {
            case .success(let stream):
                recorder.upstreamStreams(delta: 1)
                // Told by the stream's handler as it closes: one closure, where
                // a callback on its close future wrapped this one in another.
                stream.onClose = { recorder.upstreamStreams(delta: -1) }
                then(.success((stream, reused)))
            case .failure(let error):
                self.pool.streamEnded(on: connection)
                then(.failure(ProxyError(.connectFailed, host: connection.key.host,
                    detail: "could not open an HTTP/2 stream to \(connection.key.host): \(UpstreamConnector.describe(error))")))
            }
        }
    }
}
