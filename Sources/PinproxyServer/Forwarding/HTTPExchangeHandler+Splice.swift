import NIOCore

/// The end of a WebSocket upgrade's exchange (docs/contract.md §11): the
/// machine said `splice`, the app has the `101`, and the connection becomes
/// a byte splice with the upstream (`Pipelines/WebSocketSplicePipeline.swift`).
/// Whether that worked, and when the splice ends, go back to the machine as
/// events (`spliceFailed`, `spliceEnded`); it ends the exchange.
extension HTTPExchangeHandler {
    /// The WebSocket `101` reached the app (`written`): both connections
    /// become one splice.
    func splice(_ upstream: UpstreamConnection, _ exchange: Exchange, written: Bool, context: ChannelHandlerContext) {
        let fail = { (reason: SpliceFailure) in self.execute(self.machine.spliceFailed(reason), context: context) }
        guard written, context.channel.isActive else { return fail(.clientClosed) }
        guard upstream.isActive else { return fail(.upstreamClosed) }
        guard let serverLayers else { return fail(.noHTTP1Layers) }
        do {
            let logger = services.logger
            let client = clientAddress
            try WebSocketSplicePipeline.install(
                client: context, clientLayers: serverLayers, upstream: upstream, idleTimeout: TimeAmount(limits.idleTimeout),
                onIdle: { [services] in
                    logger.info("spliced connection idle; closed", metadata: [
                        "host": "\(exchange.host)", "client": "\(client)", "reason": "limits.idle_timeout"])
                    services.instrumentation.idleClosed(policy: exchange.policy, kind: .websocket)
                },
                onClose: { up, down in
                    // This handler is out of the pipeline by now: the action
                    // (the access line) touches no channel.
                    self.execute(self.machine.spliceEnded(bytesUp: up, bytesDown: down), context: context)
                })
        } catch {
            fail(.pipeline("\(error)"))
        }
    }

    /// The machine's `abandonSplice`.
    func abandonSplice(_ upstream: UpstreamConnection, _ exchange: Exchange, context: ChannelHandlerContext) {
        services.logger.warning("WebSocket splice not set up", metadata: [
            "host": "\(exchange.host)", "client": "\(clientAddress)", "reason": "\(exchange.failure?.text ?? "-")"])
        release(upstream, reusable: false)
        logAccess(exchange)
        context.close(promise: nil)
    }
}
