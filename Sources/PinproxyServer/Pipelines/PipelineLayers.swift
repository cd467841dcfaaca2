import NIOCore

/// The handlers one builder added to one channel, kept as the instances
/// themselves, so that the shape they make comes out again exactly: nothing in
/// pinproxy takes a handler out by looking up its type (which could take a
/// second handler of that type, or none, by mistake). Confined to the
/// channel's event loop.
final class PipelineLayers {
    /// In removal order: the handlers that take HTTP parts first.
    private(set) var handlers: [any RemovableChannelHandler]
    /// Byte-to-message decoders: they go last, and hand on, as they go, the
    /// bytes they held past their last message (a TLS hello sent with the
    /// CONNECT head, a WebSocket frame sent with the `101`).
    let decoders: [any RemovableChannelHandler]

    init(handlers: [any RemovableChannelHandler], decoders: [any RemovableChannelHandler]) {
        self.handlers = handlers
        self.decoders = decoders
    }

    /// No layers: a connection that never had the listener's (a transparent one).
    static var none: PipelineLayers { PipelineLayers(handlers: [], decoders: []) }

    /// `handler`, added to the same channel by the same builder, is taken out
    /// right after `earlier`.
    func insert(_ handler: any RemovableChannelHandler, after earlier: any RemovableChannelHandler) {
        let index = handlers.firstIndex { $0 === earlier }.map { $0 + 1 } ?? handlers.endIndex
        handlers.insert(handler, at: index)
    }

    /// Takes out the handlers (one that already left, as NIO's upgrade
    /// handler does after the first request, is skipped).
    func removeHandlers(from pipeline: ChannelPipeline.SynchronousOperations) {
        for handler in handlers {
            pipeline.removeHandler(handler, promise: nil)
        }
    }

    /// Takes out the decoders; each future completes once that decoder is
    /// gone and has handed on what it held.
    func removeDecoders(from pipeline: ChannelPipeline.SynchronousOperations) -> [EventLoopFuture<Void>] {
        decoders.map { pipeline.removeHandler($0) }
    }

    /// Both, handlers first.
    func remove(from pipeline: ChannelPipeline.SynchronousOperations) {
        removeHandlers(from: pipeline)
        _ = removeDecoders(from: pipeline)
    }
}
