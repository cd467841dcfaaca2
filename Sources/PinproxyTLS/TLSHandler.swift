import NIOCore
import NIOTLS

/// Drives one `SSL*` from a SwiftNIO pipeline: ciphertext below, plaintext
/// above. Used for both legs of the proxy — the server side towards the
/// legacy app (with a certificate minted per SNI) and the client side towards
/// the upstream (with the caller's pin check after OpenSSL's verification).
///
/// Writes are buffered until the handshake is done and until flush; one flush
/// becomes one ciphertext write whose promise completes all of its writes.
/// Reads follow the channel's own: with `autoRead` off, nothing is decrypted
/// that the next handler did not ask for, so backpressure holds end to end.
public final class TLSHandler: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        /// Added, channel not active yet.
        case idle
        case handshaking
        /// Server: the handshake is paused in `cert_cb` while a certificate is selected.
        case awaitingCertificate
        case active
        /// We sent close_notify and half-closed; the peer may still send.
        case outputClosed
        /// The peer sent close_notify and the channel allows half-closure; we may still send.
        case inputClosed
        /// Our close_notify is going out before the channel closes.
        case closing
        case closed
    }

    private var state: State = .idle
    private let connection: TLSConnection
    private let verifier: TLSPeerVerifier?
    private let certificateSelector: TLSCertificateSelector?
    /// The most plaintext one TLS record carries.
    private static let recordPayload = 16_384
    /// Writes up to this size are gathered; copying more would cost more than a record.
    private static let gatherLimit = 2_048
    private var bufferedWrites: MarkedCircularBuffer<(data: ByteBuffer, promise: EventLoopPromise<Void>?)> = .init(initialCapacity: 4)
    /// The next handler called `read()` and has had no plaintext since.
    private var readPending = false
    private var firedPlaintext = false
    private var closePromise: EventLoopPromise<Void>?
    /// A TLS 1.3 server's session ticket waits in the BIO for the next
    /// write (the first response, an HTTP/2 preface), so it costs no write
    /// and no wake-up of the client of its own.
    private var ticketHeld = false
    /// Whether this connection keeps OpenSSL's record buffers between
    /// records; while it does, `bufferCheck` looks every
    /// `RecordBufferKeeping.quietInterval` whether it is still busy.
    private var bufferKeeping = RecordBufferKeeping()
    private var bufferCheck: Scheduled<Void>?
    /// Whether the buffers are kept now (tests).
    var keepsRecordBuffers: Bool { bufferKeeping.keeping }
    /// How often this connection gave kept buffers back (tests).
    private(set) var buffersReleased = 0

    /// What the handshake settled, once it has.
    public private(set) var handshakeInfo: TLSHandshakeInfo?

    /// A client towards `serverName`. SNI is sent unless it is an IP literal;
    /// `verifyHostname` (default: `serverName`) must match the leaf; `verifier`
    /// runs on the verified chain before any application byte moves.
    /// `applicationProtocols` replaces the context's ALPN offer for this one
    /// connection (a WebSocket upgrade needs `http/1.1` from a server that
    /// would otherwise choose `h2`).
    public init(
        clientContext context: TLSContext,
        serverName: String?,
        verifyHostname: String? = nil,
        sessionKey: String? = nil,
        applicationProtocols: [String]? = nil,
        verifier: TLSPeerVerifier? = nil
    ) throws {
        precondition(context.configuration.role == .client, "TLSHandler(clientContext:) needs a client context")
        self.connection = try TLSConnection(
            context: context, serverName: serverName, verifyHostname: verifyHostname ?? serverName,
            sessionKey: sessionKey ?? serverName, selectsCertificates: false)
        if let applicationProtocols { try connection.offer(applicationProtocols) }
        self.verifier = verifier
        self.certificateSelector = nil
    }

    /// A server. With a `certificateSelector`, each connection's certificate is
    /// chosen by SNI during the handshake; without, the context's is served.
    public init(serverContext context: TLSContext, certificateSelector: TLSCertificateSelector? = nil) throws {
        precondition(context.configuration.role == .server, "TLSHandler(serverContext:) needs a server context")
        self.connection = try TLSConnection(
            context: context, serverName: nil, verifyHostname: nil, sessionKey: nil,
            selectsCertificates: certificateSelector != nil)
        self.verifier = nil
        self.certificateSelector = certificateSelector
    }

    // MARK: Lifecycle

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            startHandshake(context: context)
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        stopBufferChecks()
    }

    public func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        startHandshake(context: context)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        switch state {
        case .handshaking, .awaitingCertificate:
            context.fireErrorCaught(TLSError.tlsHandshake("connection closed by peer during the handshake"))
        case .active:
            // EOF without close_notify: the peer (or a middlebox) cut the stream;
            // what was read may be truncated, so say so.
            context.fireErrorCaught(TLSError.uncleanShutdown)
        case .idle, .outputClosed, .inputClosed, .closing, .closed:
            // After our own close_notify a peer may simply hang up (RFC 8446 §6.1).
            break
        }
        state = .closed
        stopBufferChecks()
        failBufferedWrites(with: ChannelError.ioOnClosedChannel)
        closePromise?.succeed()
        closePromise = nil
        context.fireChannelInactive()
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard case .idle = state else { return }
        state = .handshaking
        if let selector = certificateSelector {
            let loop = context.eventLoop
            connection.selectCertificate = { serverName in selector(serverName, loop) }
        }
        handshakeStep(context: context)
    }

    // MARK: Handshake

    private func handshakeStep(context: ChannelHandlerContext) {
        switch connection.doHandshake() {
        case .incomplete:
            writeCiphertext(context: context, promise: nil)
            if case .requested(let certificate) = connection.certificateSelection {
                awaitCertificate(context: context, certificate)
            } else {
                // The handshake needs the peer's bytes whatever the app asked for.
                context.read()
            }
        case .complete:
            if connection.queuedOnlyTicket {
                ticketHeld = true
            } else {
                writeCiphertext(context: context, promise: nil)
            }
            handshakeCompleted(context: context)
        case .failed(let error):
            writeCiphertext(context: context, promise: nil)  // the alert, if OpenSSL queued one
            fail(context: context, error: error)
        }
    }

    /// The selector answered with a future (one at hand was served inside
    /// `cert_cb`): the handshake waits for it.
    private func awaitCertificate(context: ChannelHandlerContext, _ certificate: EventLoopFuture<TLSCertifiedKey>) {
        state = .awaitingCertificate
        connection.certificateSelection = .pending
        let loop = context.eventLoop
        let isolated = loop.assumeIsolated()
        // Resume on a later tick of our own loop, never from inside cert_cb.
        certificate.hop(to: loop).assumeIsolated().whenComplete { result in
            isolated.execute {
                self.certificateSelected(context: context, result: result)
            }
        }
    }

    private func certificateSelected(context: ChannelHandlerContext, result: Result<TLSCertifiedKey, any Error>) {
        switch state {
        case .awaitingCertificate:
            switch result {
            case .success(let certified):
                connection.certificateSelection = .ready(certified)
            case .failure(let error):
                connection.certificateSelection = .failed(.tlsHandshake("no certificate for this server name: \(error)"))
            }
            state = .handshaking
            handshakeStep(context: context)
        case .closed, .closing:
            return  // the channel went away while we waited
        case .idle, .handshaking, .active, .outputClosed, .inputClosed:
            preconditionFailure("certificate selected in state \(state)")
        }
    }

    private func handshakeCompleted(context: ChannelHandlerContext) {
        let info = connection.handshakeInfo()
        if let verifier, case .reject(let error) = verifier(info) {
            // Not one application byte has moved in either direction.
            fail(context: context, error: error)
            return
        }
        handshakeInfo = info
        state = .active
        // NIO's event first: an `ApplicationProtocolNegotiationHandler` builds the
        // HTTP layers for the negotiated protocol on it, so they are in place for
        // pinproxy's own event (readiness, counting) and for the first byte.
        context.fireUserInboundEventTriggered(NIOTLS.TLSUserEvent.handshakeCompleted(negotiatedProtocol: info.applicationProtocol))
        context.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(info))
        // Writes made during the handshake go out now, if they were flushed.
        if bufferedWrites.hasMark {
            flushBufferedWrites(context: context)
        }
        // Application data may have arrived with the handshake's last flight.
        decryptAvailable(context: context)
        if firedPlaintext {
            firedPlaintext = false
            context.fireChannelReadComplete()
        }
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let ciphertext = unwrapInboundIn(data)
        switch state {
        case .closed, .closing, .inputClosed:
            return  // nothing after close_notify or an error is application data
        case .idle, .awaitingCertificate:
            connection.feed(ciphertext)  // kept in the BIO until the handshake goes on
        case .handshaking:
            connection.feed(ciphertext)
            handshakeStep(context: context)
        case .active, .outputClosed:
            connection.feed(ciphertext)
            recordsMoved(context: context)
            decryptAvailable(context: context)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if firedPlaintext {
            // Not clearing `readPending` here: a read() the app asked for while
            // handling this burst's plaintext is a request for more, and must
            // survive a next burst that brings only part of a record.
            firedPlaintext = false
            context.fireChannelReadComplete()
        } else if readPending {
            // Ciphertext came but no whole record: the app's read() is still owed.
            switch state {
            case .active, .outputClosed:
                context.read()
            case .idle, .handshaking, .awaitingCertificate, .inputClosed, .closing, .closed:
                break
            }
        }
    }

    private func decryptAvailable(context: ChannelHandlerContext) {
        loop: while true {
            switch state {
            case .active, .outputClosed:
                break
            case .idle, .handshaking, .awaitingCertificate, .inputClosed, .closing, .closed:
                break loop
            }
            switch connection.read(allocator: context.channel.allocator) {
            case .complete(.plaintext(let plaintext)):
                firedPlaintext = true
                readPending = false  // answered; the app may ask again while it reads this
                context.fireChannelRead(wrapInboundOut(plaintext))
                // Everything fed is decrypted: the burst ends without the read
                // that could only say "want more" (two per request, per leg).
                if !connection.hasBufferedInput { break loop }
            case .complete(.closeNotify):
                receivedCloseNotify(context: context)
                break loop
            case .incomplete:
                break loop
            case .failed(let error):
                fail(context: context, error: error)
                break loop
            }
        }
        // Reading may have queued output (a KeyUpdate answer, an alert);
        // a held ticket goes with the next write.
        if connection.hasPendingCiphertext, !ticketHeld, case .active = state {
            writeCiphertext(context: context, promise: nil)
        }
    }

    private func receivedCloseNotify(context: ChannelHandlerContext) {
        switch state {
        case .active:
            let halfClosure = (try? context.channel.syncOptions?.getOption(ChannelOptions.allowRemoteHalfClosure)) ?? false
            if halfClosure {
                state = .inputClosed
                if firedPlaintext {
                    firedPlaintext = false
                    context.fireChannelReadComplete()
                }
                context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            } else {
                // Answer with ours and close, as a TLS peer should.
                closeWithNotify(context: context, promise: nil)
            }
        case .outputClosed:
            // Both directions are now closed cleanly.
            state = .closing
            context.close(promise: nil)
        case .idle, .handshaking, .awaitingCertificate, .inputClosed, .closing, .closed:
            preconditionFailure("close_notify decrypted in state \(state)")
        }
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let channelEvent = event as? ChannelEvent, channelEvent == .inputClosed {
            // The transport's EOF (seen only with half-closure allowed).
            switch state {
            case .inputClosed, .closing, .closed:
                return  // already told, after close_notify
            case .handshaking, .awaitingCertificate, .idle:
                fail(context: context, error: TLSError.tlsHandshake("connection closed by peer during the handshake"))
            case .active, .outputClosed:
                fail(context: context, error: TLSError.uncleanShutdown)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound

    public func read(context: ChannelHandlerContext) {
        readPending = true
        context.read()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .outputClosed, .closing:
            promise?.fail(ChannelError.outputClosed)
        case .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        case .idle, .handshaking, .awaitingCertificate, .active, .inputClosed:
            bufferedWrites.append((unwrapOutboundIn(data), promise))
        }
    }

    public func flush(context: ChannelHandlerContext) {
        bufferedWrites.mark()
        switch state {
        case .active, .inputClosed:
            flushBufferedWrites(context: context)
        case .idle, .handshaking, .awaitingCertificate:
            break  // flushed when the handshake completes
        case .outputClosed, .closing, .closed:
            break
        }
    }

    private func flushBufferedWrites(context: ChannelHandlerContext) {
        var promises: [EventLoopPromise<Void>] = []
        // Small writes (an HTTP head, a short body, a chunk trailer) are
        // gathered into one record: one AEAD pass and 22 bytes of framing
        // instead of one per write. Larger writes go as they are, uncopied.
        var gathered: ByteBuffer?
        func encrypt(_ data: ByteBuffer) -> Bool {
            switch connection.write(data) {
            case .complete:
                return true
            case .incomplete:
                preconditionFailure("the transport BIO cannot push back on SSL_write")
            case .failed(let error):
                promises.forEach { $0.fail(error) }
                fail(context: context, error: error)  // fails the writes still buffered
                return false
            }
        }
        while bufferedWrites.hasMark, let (data, promise) = bufferedWrites.popFirst() {
            if let promise { promises.append(promise) }
            if data.readableBytes <= Self.gatherLimit {
                if var pending = gathered, pending.readableBytes + data.readableBytes <= Self.recordPayload {
                    gathered = nil  // keep the buffer uniquely referenced while appending
                    var data = data
                    pending.writeBuffer(&data)
                    gathered = pending
                    continue
                }
                if let pending = gathered, !encrypt(pending) { return }
                gathered = data
                continue
            }
            if let pending = gathered {
                gathered = nil
                guard encrypt(pending) else { return }
            }
            guard encrypt(data) else { return }
        }
        if let pending = gathered, !encrypt(pending) { return }
        let combined: EventLoopPromise<Void>?
        switch promises.count {
        case 0: combined = nil
        case 1: combined = promises[0]
        default:
            combined = context.eventLoop.makePromise()
            combined!.futureResult.assumeIsolated().whenComplete { result in
                promises.forEach { $0.completeWith(result) }
            }
        }
        writeCiphertext(context: context, promise: combined)
    }

    /// Sends whatever OpenSSL has queued, as one write, and flushes.
    private func writeCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        ticketHeld = false
        if let ciphertext = connection.drainCiphertext() {
            recordsMoved(context: context)
            context.writeAndFlush(wrapOutboundOut(ciphertext), promise: promise)
        } else {
            promise?.succeed()
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        switch mode {
        case .output:
            switch state {
            case .active:
                state = .outputClosed
                flushBufferedWrites(context: context)
                connection.shutdown()
                writeCiphertext(context: context, promise: nil)
                context.close(mode: .output, promise: promise)
            case .inputClosed:
                closeWithNotify(context: context, promise: promise)
            case .idle, .handshaking, .awaitingCertificate, .outputClosed, .closing, .closed:
                context.close(mode: .output, promise: promise)
            }
        case .input:
            context.close(mode: .input, promise: promise)
        case .all:
            switch state {
            case .active, .inputClosed:
                closeWithNotify(context: context, promise: promise)
            case .outputClosed, .idle, .handshaking, .awaitingCertificate:
                state = .closing
                context.close(promise: promise)
            case .closing:
                // Already on its way; complete this promise with that close.
                if let promise {
                    if let closePromise { closePromise.futureResult.cascade(to: promise) } else { closePromise = promise }
                }
            case .closed:
                // The connection has ended as far as TLS goes; the channel
                // itself answers the close (a socket already closed fails it
                // with `alreadyClosed`). Swallowing it here left a channel
                // that saw a stray `channelInactive` open for ever: the fuzz
                // harness grew by one pipeline and SSL object per input.
                context.close(promise: promise)
            }
        }
    }

    /// close_notify, then the channel: the notify goes out before the socket closes
    /// (or after a bounded wait, should the peer have stopped reading).
    private func closeWithNotify(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        state = .closing
        failBufferedWrites(with: ChannelError.ioOnClosedChannel)
        connection.shutdown()
        let notified = context.eventLoop.makePromise(of: Void.self)
        writeCiphertext(context: context, promise: notified)
        let channel = context.channel
        let deadline = context.eventLoop.scheduleTask(in: .seconds(3)) {
            channel.close(promise: nil)
        }
        notified.futureResult.assumeIsolated().whenComplete { _ in
            deadline.cancel()
            context.close(promise: promise)
        }
    }

    // MARK: Record buffers

    /// Past the handshake and not yet ending: where records carry the app's
    /// data (a handshake's flights do not make a connection busy; at the
    /// end, SSL_free takes the buffers with the rest).
    private var carriesData: Bool {
        switch state {
        case .active, .outputClosed, .inputClosed:
            return true
        case .idle, .handshaking, .awaitingCertificate, .closing, .closed:
            return false
        }
    }

    private func recordsMoved(context: ChannelHandlerContext) {
        guard carriesData else { return }
        // The loop's clock, read only when the keeping asks for it (not per record).
        guard bufferKeeping.recordMoved(now: { context.eventLoop.now }) else { return }
        connection.keepBuffers(true)
        scheduleBufferCheck(context: context)
    }

    private func scheduleBufferCheck(context: ChannelHandlerContext) {
        bufferCheck = context.eventLoop.assumeIsolated().scheduleTask(in: RecordBufferKeeping.quietInterval) {
            self.checkBuffers(context: context)
        }
    }

    private func checkBuffers(context: ChannelHandlerContext) {
        bufferCheck = nil
        guard carriesData else { return }
        if bufferKeeping.check() {
            scheduleBufferCheck(context: context)
            return
        }
        connection.keepBuffers(false)
        // Part of a record may still wait in them: OpenSSL frees them once it has gone through.
        if connection.releaseBuffers() { buffersReleased += 1 }
    }

    private func stopBufferChecks() {
        bufferCheck?.cancel()
        bufferCheck = nil
    }

    // MARK: Failure

    private func fail(context: ChannelHandlerContext, error: any Error) {
        switch state {
        case .closed, .closing:
            return
        case .idle, .handshaking, .awaitingCertificate, .active, .outputClosed, .inputClosed:
            break
        }
        state = .closing
        failBufferedWrites(with: error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failBufferedWrites(with error: any Error) {
        while let (_, promise) = bufferedWrites.popFirst() {
            promise?.fail(error)
        }
    }
}

@available(*, unavailable)
extension TLSHandler: Sendable {}
