import NIOCore
import PinproxyPolicy

/// The upstream leg through a parent proxy (`upstream_proxy:`), before it
/// carries anything of pinproxy's own: the `ParentConnectHandler` alone,
/// which asks for `CONNECT target` and reads the answer head. Once the parent
/// said 2xx it comes out, by the name it was added under, and the leg's own
/// layers go in (`UpstreamPipeline` or a tunnel's glue).
enum ParentTunnelPipeline {
    static let connectHandlerName = "pinproxy.parent-connect"

    static func configure(_ channel: any Channel, parent: UpstreamProxy, target: HostPort, host: String,
                          answered: EventLoopPromise<Void>) throws {
        try channel.pipeline.syncOperations.addHandler(
            ParentConnectHandler(parent: parent, target: target, host: host, answered: answered), name: connectHandlerName)
    }

    /// Takes the CONNECT handler out; the bytes after the answer head (none
    /// yet: the upstream speaks after pinproxy) stay in the socket.
    static func removeConnect(_ channel: any Channel) {
        channel.pipeline.syncOperations.removeHandler(name: connectHandlerName, promise: nil)
    }
}
