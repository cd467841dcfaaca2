import NIOCore

/// The exchange's upstream connection: the one this app connection parked
/// after its last request, taken back when it is still free, or a stream on
/// the HTTP/2 connection where its session keeps room, else the pool's
/// (`UpstreamCheckout`); given back, parked or its room kept when the
/// exchange is done with it (`UpstreamParking`, `SessionStreamRoom`).
extension HTTPExchangeHandler {
    func release(_ upstream: UpstreamConnection, reusable: Bool) {
        upstream.receiver = nil
        if !reusable { upstream.reusable = false }
        // A stream's room is kept for the session's next request
        // (`SessionStreamRoom`), if nobody is waiting for one.
        if upstream.parent != nil, reusable, let interception {
            interception.streamRoom.keep(upstream, pool: services.pool)
            return
        }
        // Kept for this connection's next request, if nobody is waiting for
        // one (`UpstreamParking`); else, or when it cannot be kept, released.
        // An HTTP/2 stream has no next request.
        if reusable, parked == nil, clientProtocol == .http1 {
            if services.pool.park(upstream) {
                parked = upstream
                parkedAt = .now()
            }
            return
        }
        services.pool.release(upstream)
    }

    /// The connection this handler parked, taken back, if nobody took it
    /// first and it is still open (a closed one goes back to the pool, which
    /// forgets it).
    func takeParked() -> UpstreamConnection? {
        guard let connection = parked else { return nil }
        parked = nil
        guard connection.parking?.take() == true else { return nil }
        guard connection.isActive else {
            services.pool.release(connection)
            return nil
        }
        return connection
    }

    /// The parked connection, if still free, back to the pool, idle since it
    /// was parked: the app connection is going.
    func releaseParked() {
        guard let connection = takeParked() else { return }
        services.pool.release(connection, idleSince: parkedAt)
    }

    /// The plan is read where the route holds it, and `acquired` reads it
    /// from the machine: nothing here copies it or captures a copy.
    func acquire(_ route: Route, context: ChannelHandlerContext) {
        // The common keep-alive request: the connection the last one used,
        // without the pool (same policy, host, port and TLS: the same key).
        if let connection = takeParked() {
            if connection.key == route.plan.poolKey {
                return acquired(.success((connection, true)), context: context)
            }
            services.pool.release(connection, idleSince: parkedAt)
        }
        // A session's next stream, on room it kept on an HTTP/2 connection: without the pool.
        if let connection = interception?.streamRoom.take(for: route.plan.poolKey, pool: services.pool) {
            return services.upstreams.openStream(on: connection, policy: route.plan.policy) { self.acquired($0, context: context) }
        }
        switch services.upstreams.checkoutNow(route.plan, on: context.eventLoop) {
        case .pooled(let connection):
            acquired(.success((connection, true)), context: context)
        case .stream(let connection):
            services.upstreams.openStream(on: connection, policy: route.plan.policy) { self.acquired($0, context: context) }
        case .pending(let future):
            future.assumeIsolated().whenComplete { self.acquired($0, context: context) }
        }
    }

    func acquired(_ result: Result<UpstreamCheckout.CheckedOut, any Error>, context: ChannelHandlerContext) {
        switch result {
        case .failure(let error):
            execute(machine.upstreamFailed(error), context: context)
        case .success(let (connection, reused)):
            let decision = machine.tokenDecision(verdict: { connection.pinVerdict }, connectIdentity: interception?.identity)
                ?? TokenAttachment.Decision(authorization: .untouched)  // nothing acquiring: the machine gives it back
            if let reason = decision.withheldBecause, let plan = machine.acquiringPlan {
                services.logger.warning("bearer token not attached", metadata: [
                    "host": "\(plan.host)", "policy": "\(plan.policy?.metricLabel ?? "_none")", "reason": "\(reason)",
                ])
            }
            let action = machine.upstreamAcquired(connection, reused: reused, pin: connection.pinLabel,
                                                  address: connection.remoteAddress, authorization: decision.authorization, now: .now())
            if case .giveBack = action {} else { connection.receiver = self }
            execute(action, context: context)
        }
    }
}
