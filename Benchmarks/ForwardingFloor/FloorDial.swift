// How the floor's forwarders reach their upstream: one dial, and what an app
// connection's upstream leg is while it is dialled. Shared by the HTTP/1
// forwarder (Floor.swift), the splice (FloorSplice.swift) and the h2 path
// (FloorHTTP2.swift, which holds its own waiting streams).
import NIOCore
import NIOPosix
import PinproxyTLS

enum FloorDial {
    /// A TCP connection to `target` with `tls` (the upstream context for
    /// `target.host`) and then what `configure` adds.
    static func connect(
        _ target: (host: String, port: Int), tls: TLSContext, on loop: any EventLoop,
        configure: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) -> EventLoopFuture<any Channel> {
        let host = target.host
        return ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSHandler(clientContext: tls, serverName: host))
                    try configure(sync)
                }
            }
            .connect(host: target.host, port: target.port)
    }
}

/// An app connection's upstream: none yet, being dialled (the app's parts
/// held), ready, or closed with the app.
enum UpstreamLeg<Part: Sendable> {
    case none
    case dialling(pending: [Part])
    case ready(any Channel)
    case closed

    /// Holds `part` while the upstream is dialled. Returns whether this is
    /// the first part, so the caller dials now.
    mutating func hold(_ part: Part) -> Bool {
        switch self {
        case .none:
            self = .dialling(pending: [part])
            return true
        case .dialling(var pending):
            pending.append(part)
            self = .dialling(pending: pending)
            return false
        case .ready, .closed:
            preconditionFailure("a part held for an upstream that is not being dialled")
        }
    }

    /// The dial ended: the held parts go up and the leg is ready, or the app
    /// is closed. A dial that ended after the app did is closed at once.
    mutating func dialled(_ result: Result<any Channel, any Error>, app: ChannelHandlerContext) {
        guard case .dialling(let pending) = self else {
            if case .success(let channel) = result { channel.close(promise: nil) }
            return
        }
        switch result {
        case .failure:
            self = .closed
            app.close(promise: nil)
        case .success(let channel):
            self = .ready(channel)
            for part in pending { channel.write(part, promise: nil) }
            channel.flush()
        }
    }
}
