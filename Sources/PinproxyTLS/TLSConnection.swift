import COpenSSL
import NIOCore

/// The result of one OpenSSL operation, with want-read/want-write folded into
/// `incomplete` so they never leak into the handler's logic.
enum TLSStep<Value> {
    case incomplete
    case complete(Value)
    case failed(TLSError)
}

/// What one `SSL_read` produced.
enum TLSReadResult {
    case plaintext(ByteBuffer)
    /// The peer sent close_notify.
    case closeNotify
}

/// One `SSL*` with its transport BIO: ciphertext in through `feed`, out
/// through `drainCiphertext`. Used only on its channel's event loop.
final class TLSConnection {
    let ssl: OpaquePointer
    let context: TLSContext
    /// Ciphertext between the network and OpenSSL, both ways.
    private let transport = TransportBIO()
    /// The key client sessions are stored and resumed under ("host:port").
    private let sessionKey: String?
    /// The verified chain of the session offered for resumption, if any.
    private var offeredSessionChain: [Certificate] = []

    /// Where server certificate selection stands (see `certificateCallback`).
    enum CertificateSelection {
        /// No selector: the context's own certificate is served.
        case fixed
        case notRequested
        /// The selector answered with a future: the handshake is paused until
        /// the handler has waited for it.
        case requested(EventLoopFuture<TLSCertifiedKey>)
        /// The handler waits for that future.
        case pending
        case ready(TLSCertifiedKey)
        case installed
        case failed(TLSError)
    }
    var certificateSelection: CertificateSelection
    /// Asked from inside `cert_cb` with the client's SNI (set by the handler,
    /// which knows the event loop; nil when the context's certificate is served).
    var selectCertificate: ((_ serverName: String?) -> TLSCertificateChoice)?

    init(context: TLSContext, serverName: String?, verifyHostname: String?, sessionKey: String?, selectsCertificates: Bool) throws {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(context.ref) else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "SSL_new failed"))
        }
        self.ssl = ssl
        self.context = context
        transport.attach(to: ssl)
        self.sessionKey = sessionKey
        self.certificateSelection = selectsCertificates ? .notRequested : .fixed

        switch context.configuration.role {
        case .client:
            SSL_set_connect_state(ssl)
            if let serverName, !serverName.isEmpty, !IPAddressText.isIPAddress(serverName) {
                _ = CPinproxy_SSL_set_tlsext_host_name(ssl, serverName)
            }
            if let verifyHostname, !verifyHostname.isEmpty {
                if IPAddressText.isIPAddress(verifyHostname) {
                    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), verifyHostname)
                } else {
                    SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
                    guard SSL_set1_host(ssl, verifyHostname) == 1 else {
                        SSL_free(ssl)
                        throw TLSError.configuration("invalid hostname to verify: \(verifyHostname)")
                    }
                }
            }
            if let sessionKey, let cache = context.sessionCache {
                offeredSessionChain = cache.apply(to: ssl, for: sessionKey)
            }
        case .server:
            SSL_set_accept_state(ssl)
        }
        // OpenSSL's callbacks find this object through the SSL's app data. The
        // reference is unretained: the handler owns us and frees the SSL first.
        let unmanaged = Unmanaged.passUnretained(self)
        _ = CPinproxy_SSL_set_app_data(ssl, unmanaged.toOpaque())
    }

    deinit {
        _ = CPinproxy_SSL_set_app_data(ssl, nil)
        transport.detach()
        SSL_free(ssl)  // drops its reference to the BIO; `transport` drops the other
    }

    static func from(_ ssl: OpaquePointer) -> TLSConnection? {
        guard let raw = CPinproxy_SSL_get_app_data(ssl) else { return nil }
        return Unmanaged<TLSConnection>.fromOpaque(raw).takeUnretainedValue()
    }

    // MARK: Ciphertext in and out

    /// Replaces the context's ALPN offer for this connection (a client, before
    /// its handshake). OpenSSL copies the list.
    func offer(_ protocols: [String]) throws {
        let wire = try TLSContext.alpnWireFormat(protocols).dropFirst(4)
        OpenSSLErrorQueue.clear()
        // Note the inverted convention: 0 is success.
        guard Array(wire).withUnsafeBufferPointer({ SSL_set_alpn_protos(ssl, $0.baseAddress, UInt32($0.count)) }) == 0 else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "SSL_set_alpn_protos failed"))
        }
    }

    func feed(_ buffer: ByteBuffer) {
        transport.feed(buffer)
    }

    /// Everything OpenSSL has queued for the network, or nil.
    func drainCiphertext() -> ByteBuffer? {
        transport.takeOutput()
    }

    var hasPendingCiphertext: Bool { transport.hasOutput }

    /// A server whose TLS 1.3 handshake just completed: what OpenSSL queued
    /// in that last step is only its session ticket (its own Finished went
    /// out before the client's), which the client needs for its next
    /// connection, not this one. In TLS 1.2 the server's Finished may come
    /// last, and the client waits for it.
    var queuedOnlyTicket: Bool {
        context.configuration.role == .server && SSL_version(ssl) == TLS1_3_VERSION && transport.hasOutput
    }

    /// Whether a `read` could return anything now: ciphertext fed and not yet
    /// taken by OpenSSL, or a record it holds. When neither, a read can only
    /// say "want more", after allocating a record-sized buffer for nothing.
    var hasBufferedInput: Bool { transport.hasInput || SSL_has_pending(ssl) == 1 }

    // MARK: Operations

    func doHandshake() -> TLSStep<Void> {
        OpenSSLErrorQueue.clear()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            OpenSSLErrorQueue.clear()
            return .complete(())
        }
        let error = SSL_get_error(ssl, rc)
        switch error {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_X509_LOOKUP:
            OpenSSLErrorQueue.clear()
            return .incomplete
        default:
            if case .failed(let selectionError) = certificateSelection {
                OpenSSLErrorQueue.clear()
                return .failed(selectionError)
            }
            let entries = OpenSSLErrorQueue.drain()
            let verify = context.configuration.role == .client && context.configuration.verification == .full
                ? SSL_get_verify_result(ssl) : Int(X509_V_OK)
            // A client that already holds the server's certificate is past the
            // server's hello: ciphers were agreed, whatever alert follows.
            let pastServerHello = context.configuration.role == .client && SSL_get0_peer_certificate(ssl) != nil
            return .failed(TLSError.classifyHandshakeFailure(
                verifyResult: verify, errors: entries, pastServerHello: pastServerHello,
                fallback: error == SSL_ERROR_SYSCALL ? "transport error during handshake" : "handshake failed (SSL error \(error))"))
        }
    }

    /// Decrypts as much as one buffer holds.
    func read(allocator: ByteBufferAllocator) -> TLSStep<TLSReadResult> {
        var buffer = allocator.buffer(capacity: 16384)
        var result: Int32 = 0
        OpenSSLErrorQueue.clear()
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 16384) { out in
            result = SSL_read(ssl, out.baseAddress, Int32(out.count))
            return result > 0 ? Int(result) : 0
        }
        if result > 0 {
            return .complete(.plaintext(buffer))
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            OpenSSLErrorQueue.clear()
            return .incomplete
        case SSL_ERROR_ZERO_RETURN:
            OpenSSLErrorQueue.clear()
            return .complete(.closeNotify)
        default:
            return .failed(TLSError.classifyReadFailure(OpenSSLErrorQueue.drain(), fallback: "SSL_read failed"))
        }
    }

    /// Encrypts all of `buffer`; the transport BIO never pushes back, so this completes or fails.
    func write(_ buffer: ByteBuffer) -> TLSStep<Void> {
        guard buffer.readableBytes > 0 else { return .complete(()) }
        transport.reserveOutput(forPlaintext: buffer.readableBytes)
        OpenSSLErrorQueue.clear()
        let result = buffer.withUnsafeReadableBytes { bytes in
            SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        }
        if result == buffer.readableBytes {
            return .complete(())
        }
        return .failed(.protocolFailure(OpenSSLErrorQueue.drainReason(or: "SSL_write failed (\(SSL_get_error(ssl, result)))")))
    }

    /// Whether OpenSSL keeps its record buffers (a read and a write buffer
    /// of a record each, about 34 KiB) between records, or frees them as
    /// soon as they are empty and takes them again for the next record (the
    /// context's `SSL_MODE_RELEASE_BUFFERS`).
    func keepBuffers(_ keep: Bool) {
        let mode = Int(SSL_MODE_RELEASE_BUFFERS)
        _ = keep ? CPinproxy_SSL_clear_mode(ssl, mode) : CPinproxy_SSL_set_mode(ssl, mode)
    }

    /// Gives the record buffers back now. False, and nothing freed, while
    /// either holds part of a record (OpenSSL frees it once it is empty).
    func releaseBuffers() -> Bool {
        SSL_free_buffers(ssl) == 1
    }

    /// Queues our close_notify.
    func shutdown() {
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(ssl)
        OpenSSLErrorQueue.clear()
    }

    // MARK: Handshake facts

    func handshakeInfo() -> TLSHandshakeInfo {
        let versionName = String(cString: SSL_get_version(ssl))
        let cipher = SSL_get_current_cipher(ssl).map { String(cString: SSL_CIPHER_get_name($0)) } ?? ""
        var alpnData: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnData, &alpnLength)
        let alpn = alpnData.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self) }
        let serverName = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }

        var sent: [Certificate] = []
        if let stack = SSL_get_peer_cert_chain(ssl) {
            sent = Self.certificates(in: stack)
        }
        // A server's "peer chain" omits the client's leaf; a client's includes it.
        if context.configuration.role == .server, let leaf = SSL_get0_peer_certificate(ssl) {
            sent.insert(Certificate(retaining: leaf), at: 0)
        }
        let verifyCode = SSL_get_verify_result(ssl)
        var verified: [Certificate] = []
        if let stack = SSL_get0_verified_chain(ssl) {
            verified = Self.certificates(in: stack)
        }
        let resumed = SSL_session_reused(ssl) == 1
        if resumed && verified.isEmpty {
            // A resumed handshake verifies nothing: its chain is the one the
            // session was verified with when it was made.
            verified = offeredSessionChain
        }
        return TLSHandshakeInfo(
            version: TLSVersion(openSSLName: versionName),
            versionName: versionName,
            cipher: cipher,
            applicationProtocol: alpn,
            serverName: serverName,
            resumed: resumed,
            peerChain: verified.isEmpty ? sent : verified,
            sentChain: sent,
            verifyResult: String(cString: X509_verify_cert_error_string(verifyCode)),
            verified: verifyCode == Int(X509_V_OK) && !verified.isEmpty)
    }

    private static func certificates(in stack: OpaquePointer) -> [Certificate] {
        (0..<CPinproxy_sk_X509_num(stack)).compactMap { index in
            CPinproxy_sk_X509_value(stack, index).map { Certificate(retaining: $0) }
        }
    }

    // MARK: Callbacks from OpenSSL (inside SSL_do_handshake)

    /// `cert_cb`: ask the selector and install its certificate in this same
    /// step when it has one at hand; pause the handshake (-1) only while its
    /// answer is a future. Resuming is the handler's, on a later tick: never
    /// re-entrantly from here.
    func certificateCallback() -> Int32 {
        switch certificateSelection {
        case .fixed, .installed:
            return 1
        case .notRequested:
            let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
            switch selectCertificate?(name) ?? .failed(TLSError.tlsHandshake("no certificate selector")) {
            case .ready(let certified):
                return install(certified)
            case .failed(let error):
                certificateSelection = .failed(.tlsHandshake("no certificate for this server name: \(error)"))
                return 0
            case .pending(let future):
                certificateSelection = .requested(future)
                return -1
            }
        case .requested, .pending:
            return -1
        case .failed:
            return 0
        case .ready(let certified):
            return install(certified)
        }
    }

    private func install(_ certified: TLSCertifiedKey) -> Int32 {
        guard let leaf = certified.chain.first,
              SSL_use_certificate(ssl, leaf.ref) == 1,
              SSL_use_PrivateKey(ssl, certified.privateKey.ref) == 1 else {
            certificateSelection = .failed(.tlsHandshake("cannot install the selected certificate: \(OpenSSLErrorQueue.drainReason(or: "unknown"))"))
            return 0
        }
        for intermediate in certified.chain.dropFirst() {
            _ = CPinproxy_SSL_add1_chain_cert(ssl, intermediate.ref)
        }
        certificateSelection = .installed
        return 1
    }

    /// The new-session callback: keep the session for the next connection to this peer.
    func storeSession(_ session: OpaquePointer) -> Bool {
        guard let sessionKey, let cache = context.sessionCache else { return false }
        var chain: [Certificate] = []
        if let stack = SSL_get0_verified_chain(ssl) { chain = Self.certificates(in: stack) }
        if chain.isEmpty && SSL_session_reused(ssl) == 1 { chain = offeredSessionChain }
        guard !chain.isEmpty else {
            return false  // no verified chain to check pins against later: not kept
        }
        cache.store(session, verifiedChain: chain, for: sessionKey)
        return true
    }
}
