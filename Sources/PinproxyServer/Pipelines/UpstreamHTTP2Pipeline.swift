import NIOCore
import NIOHTTP1
import NIOHTTP2
import PinproxyTLS

/// An upstream connection whose server selected `h2`: swift-nio-http2's
/// client pipeline after the TLS layer and an `UpstreamHTTP2ConnectionHandler`
/// (the server's stream limit and GOAWAY, for the pool); each stream an
/// exchange opens gets an `UpstreamHTTP2StreamAdapter` (request parts to
/// frame payloads and back, no HTTP/1 codec), which calls the stream's
/// `UpstreamHTTPHandler` directly, so an exchange holds a stream as it
/// would hold an HTTP/1.1 connection.
enum UpstreamHTTP2Pipeline {
    /// Adds the connection's shape at the end of `channel`'s pipeline, with
    /// ALPN settled; returns what opens its streams.
    static func configure(_ channel: any Channel, ready: EventLoopPromise<TLSHandshakeInfo?>) throws -> UpstreamMultiplexer {
        let sync = channel.pipeline.syncOperations
        let connectionHandler = UpstreamHTTP2ConnectionHandler(ready: ready)
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoderLimit.maxHeaderListSize),
        ]
        let http2 = NIOHTTP2Handler(
            mode: .client, eventLoop: channel.eventLoop, connectionConfiguration: configuration, streamConfiguration: .init()
        ) { stream in
            // Push is disabled in SETTINGS: a server that opens a stream anyway gets it closed.
            stream.close(promise: nil)
            return stream.eventLoop.makeSucceededVoidFuture()
        }
        try sync.addHandler(http2)
        try sync.addHandler(connectionHandler)
        try channel.syncOptions?.setOption(.autoRead, value: true)
        return UpstreamMultiplexer(streams: try http2.syncMultiplexer(), handler: connectionHandler)
    }

    /// One stream's pipeline: the adapter alone, which calls the stream's
    /// `UpstreamHTTPHandler` itself; returns the adapter.
    static func configureStream(_ stream: any Channel) throws -> UpstreamHTTP2StreamAdapter {
        // The exchange asks for each part of the response (`read()`), as on HTTP/1.1.
        try stream.syncOptions?.setOption(.autoRead, value: false)
        // The connection was ready before the stream: no readiness to wait on.
        let adapter = UpstreamHTTP2StreamAdapter(handler: UpstreamHTTPHandler(ready: nil, usesTLS: false))
        try stream.pipeline.syncOperations.addHandler(adapter)
        return adapter
    }
}
