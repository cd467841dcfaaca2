import NIOCore
import NIOPosix
import PinproxyPolicy

/// Carries out `UpstreamConnectMachine`'s actions on one event loop and feeds
/// back what the sockets did. The promise is completed in `perform(.succeed)`
/// or `perform(.fail)` only, and the machine returns one of them once.
///
/// The connection's layers are installed on the one channel that won the
/// dial, after it connected (the channel does not read until then): a layer
/// made per Happy Eyeballs attempt could belong to the losing attempt.
final class UpstreamConnectDriver: @unchecked Sendable {
    // @unchecked: every member is touched on `loop` only (each entry point hops there).
    private var machine: UpstreamConnectMachine
    private let plan: DialPlan
    private let addressGuard: AddressGuard
    private let loop: any EventLoop
    /// Adds the connection's layers to the connected channel; returns the
    /// handshake's outcome when the machine awaits one.
    private let install: (any Channel) throws -> EventLoopFuture<Void>?
    private let promise: EventLoopPromise<any Channel>
    private var channel: (any Channel)?
    /// The parent's CONNECT handler is in the pipeline (`ParentTunnelPipeline`).
    private var parentConnecting = false
    private var handshake: EventLoopFuture<Void>?
    private var timer: Scheduled<Void>?

    private init(plan: DialPlan, addressGuard: AddressGuard, loop: any EventLoop, awaitsHandshake: Bool,
                 install: @escaping (any Channel) throws -> EventLoopFuture<Void>?) {
        self.plan = plan
        self.addressGuard = addressGuard
        self.loop = loop
        self.install = install
        self.promise = loop.makePromise(of: (any Channel).self)
        let parent = plan.policy?.spec.upstreamProxy
        self.machine = UpstreamConnectMachine(.init(
            host: plan.host, targets: plan.targets, retries: plan.retries, parent: parent.map { "\($0)" },
            awaitsHandshake: awaitsHandshake, connectTimeout: plan.connectTimeout, handshakeTimeout: plan.handshakeTimeout))
    }

    /// A connected channel with `install`'s layers added (and, if
    /// `awaitsHandshake`, its handshake passed), or the one refusal.
    static func connect(_ plan: DialPlan, addressGuard: AddressGuard, on loop: any EventLoop, awaitsHandshake: Bool,
                        install: @escaping (any Channel) throws -> EventLoopFuture<Void>?) -> EventLoopFuture<any Channel> {
        let driver = UpstreamConnectDriver(plan: plan, addressGuard: addressGuard, loop: loop,
                                           awaitsHandshake: awaitsHandshake, install: install)
        loop.execute { driver.handle(.start) }
        return driver.promise.futureResult
    }

    private func handle(_ event: UpstreamConnectMachine.Event) {
        loop.preconditionInEventLoop()
        for action in machine.handle(event) { perform(action) }
    }

    private func perform(_ action: UpstreamConnectMachine.Action) {
        switch action {
        case .dial(let target):
            dial(target)
        case .close:
            closeChannel()
        case .discardNewChannel:
            break  // `dial` closes a channel it may not keep.
        case .sendParentConnect(let target):
            sendParentConnect(to: target)
        case .install:
            runInstall()
        case .scheduleTimeout(let stage, let amount):
            timer?.cancel()
            timer = loop.scheduleTask(in: amount) { [self] in handle(.timedOut(stage)) }
        case .succeed:
            timer?.cancel()
            promise.succeed(channel!)
        case .fail(let refusal):
            // The one failure: whatever is open is closed, the refusal is the answer.
            timer?.cancel()
            closeChannel()
            promise.fail(refusal)
        }
    }

    private func dial(_ target: HostPort) {
        let parent = plan.policy?.spec.upstreamProxy
        // The parent is dialled (and guarded) instead; it is asked for `target`.
        let address = parent.map { HostPort(host: $0.host, port: $0.port) } ?? target
        ClientBootstrap(group: loop)
            .resolver(GuardedResolver(addressGuard: addressGuard, requestedHost: plan.host, loop: loop))
            .connectTimeout(plan.connectTimeout)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // First, so the socket is known before any byte leaves (a
                    // redirect of it back to the transparent listener is a loop).
                    try channel.pipeline.syncOperations.addHandler(OwnUpstreamSockets.Tracker())
                }
            }
            .connect(host: address.host, port: address.port)
            .hop(to: loop)
            .whenComplete { [self] result in
                switch result {
                case .success(let connected):
                    guard !machine.isDone else {
                        // Too late to be used: closed here, and the machine ignores it.
                        connected.close(promise: nil)
                        return handle(.dialled)
                    }
                    channel = connected
                    handle(.dialled)
                case .failure(let error):
                    var refusal = UpstreamConnector.dialFailure(error, target: address, plan: plan)
                    if let parent { refusal.detail = "parent proxy \(parent): \(refusal.detail)" }
                    handle(.dialFailed(refusal))
                }
            }
    }

    private func sendParentConnect(to target: HostPort) {
        guard let channel, let parent = plan.policy?.spec.upstreamProxy else { return }
        let answered = loop.makePromise(of: Void.self)
        do {
            try ParentTunnelPipeline.configure(channel, parent: parent, target: target, host: plan.host, answered: answered)
            parentConnecting = true
        } catch {
            answered.fail(ProxyError(.connectFailed, host: plan.host, detail: "parent proxy \(parent): \(UpstreamConnector.describe(error))"))
        }
        answered.futureResult.whenComplete { [self] result in
            switch result {
            case .success:
                handle(.parentAnswered)
            case .failure(let error):
                handle(.parentFailed(UpstreamConnector.refusal(for: error, host: plan.host)))
            }
        }
    }

    private func runInstall() {
        guard let channel else { return handle(.installFailed(ProxyError(.connectFailed, host: plan.host, detail: "no connection to install on"))) }
        do {
            if parentConnecting {
                // Its work is done: the bytes from here on are the upstream's.
                parentConnecting = false
                ParentTunnelPipeline.removeConnect(channel)
            }
            handshake = try install(channel)
        } catch {
            return handle(.installFailed(ProxyError(.connectFailed, host: plan.host, detail: "\(plan.host): \(UpstreamConnector.describe(error))")))
        }
        handle(.installed)
        // Hooked after `.installed`: a plain connection's handshake is already complete.
        handshake?.hop(to: loop).whenComplete { [self] result in
            switch result {
            case .success: handle(.handshakeCompleted)
            case .failure(let error): handle(.handshakeFailed(UpstreamConnector.refusal(for: error, host: plan.host)))
            }
        }
    }

    private func closeChannel() {
        parentConnecting = false
        channel?.close(promise: nil)
        channel = nil
    }
}
