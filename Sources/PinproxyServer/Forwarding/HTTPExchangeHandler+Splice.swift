import NIOCore

/// The end of a WebSocket upgrade's exchange (docs/contract.md §11): the
/// machine said `splice`, the app has the `101`, and the connection becomes
/// a byte splice with the upstream (`Pipelines/WebSocketSplicePipeline.swift`).
extension HTTPExchangeHandler {
    /// The WebSocket `101` reached the app: both connections become one
    /// splice; its access line (status 101, the bytes each way) is written
    /// when it ends.
    func splice(_ upstream: UpstreamConnection, _ exchange: Exchange, written: Bool, context: ChannelHandlerContext) {
        let fail = { (reason: String) in
            self.services.logger.warning("WebSocket splice not set up", metadata: [
                "host": "\(exchange.host)", "client": "\(self.clientAddress)", "reason": "\(reason)"])
            exchange.failure = reason
            self.release(upstream, reusable: false)
            self.logAccess(exchange)
            context.close(promise: nil)
        }
        guard written, context.channel.isActive else { return fail("client_closed") }
        guard upstream.isActive else { return fail("upstream_closed") }
        do {
            let logger = services.logger
            let client = clientAddress
            guard let serverLayers else { return fail("no HTTP/1.1 layers to splice") }
            try WebSocketSplicePipeline.install(
                client: context, clientLayers: serverLayers, upstream: upstream, idleTimeout: TimeAmount(limits.idleTimeout),
                onIdle: { [services] in
                    logger.info("spliced connection idle; closed", metadata: [
                        "host": "\(exchange.host)", "client": "\(client)", "reason": "limits.idle_timeout"])
                    services.instrumentation.idleClosed(policy: exchange.policy, kind: .websocket)
                },
                onClose: { up, down in
                    exchange.bytesUp += up
                    exchange.bytesDown += down
                    self.logAccess(exchange)
                })
        } catch {
            fail("\(error)")
        }
    }
}
