import COpenSSL
import NIOConcurrencyHelpers

/// One `SSL_CTX`, built once from a `TLSConfiguration` and shared by every
/// connection of a leg (docs/contract.md §3: a host policy's client context is built when
/// the policy is compiled). Building it is where bad cipher strings, versions,
/// keys and trust files are rejected, with OpenSSL's reason.
public final class TLSContext: @unchecked Sendable {
    let ref: OpaquePointer
    public let configuration: TLSConfiguration
    /// Client sessions by peer, for resumption (nil on servers or when disabled).
    let sessionCache: TLSClientSessionCache?
    /// ALPN wire format (length-prefixed names), kept alive for OpenSSL's callbacks.
    private let alpnWire: UnsafeMutableBufferPointer<UInt8>?

    /// - Parameter trustStores: where contexts of one policy load share their
    ///   trust stores; nil loads this context's own.
    public convenience init(configuration: TLSConfiguration, trustStores: TrustStoreCache? = nil) throws {
        try self.init(configuration: configuration, trustStores: trustStores, checkingCipherPolicy: true)
    }

    /// `checkingCipherPolicy: false` skips the cipher-string judgement and
    /// keeps only the context's own floor (tests of that floor).
    init(configuration: TLSConfiguration, trustStores: TrustStoreCache?, checkingCipherPolicy: Bool) throws {
        self.configuration = configuration
        let method = configuration.role == .client ? TLS_client_method() : TLS_server_method()
        OpenSSLErrorQueue.clear()
        guard let ctx = SSL_CTX_new(method) else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "SSL_CTX_new failed"))
        }
        self.ref = ctx
        self.sessionCache = configuration.role == .client && configuration.sessionResumption
            ? TLSClientSessionCache(capacity: 1024) : nil
        if configuration.applicationProtocols.isEmpty {
            self.alpnWire = nil
        } else {
            let wire = try Self.alpnWireFormat(configuration.applicationProtocols)
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: wire.count)
            _ = buffer.initialize(from: wire)
            self.alpnWire = buffer
        }
        // From here on `deinit` frees what was made, whatever throws.
        try configureVersions()
        try configureCiphers(checkingPolicy: checkingCipherPolicy)
        try configureTrust(trustStores)
        try configureIdentity()
        configureALPN()
        configureSessions()
        configureCallbacks()
    }

    deinit {
        SSL_CTX_free(ref)
        alpnWire?.deallocate()
    }

    /// Which trust store this context verifies against: equal for two
    /// contexts that share one store. For tests and diagnostics only.
    public var trustStoreIdentity: TrustStoreIdentity {
        TrustStoreIdentity(address: UInt(bitPattern: SSL_CTX_get_cert_store(ref)))
    }

    // MARK: Versions and ciphers

    private func configureVersions() throws {
        let c = configuration
        if let max = c.maximumVersion, max < c.minimumVersion {
            throw TLSError.configuration("maximum TLS version \(max.rawValue) is below the minimum \(c.minimumVersion.rawValue)")
        }
        // OpenSSL 3 refuses TLS < 1.2 at security level 1 and above; a policy
        // that opts into legacy TLS must lower it for that context only.
        if c.minimumVersion.isLegacy {
            SSL_CTX_set_security_level(ref, 0)
        }
        guard CPinproxy_SSL_CTX_set_min_proto_version(ref, c.minimumVersion.openSSLValue) == 1 else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "OpenSSL rejected minimum TLS version \(c.minimumVersion.rawValue)"))
        }
        if let max = c.maximumVersion {
            guard CPinproxy_SSL_CTX_set_max_proto_version(ref, max.openSSLValue) == 1 else {
                throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "OpenSSL rejected maximum TLS version \(max.rawValue)"))
            }
        }
        var options = CPinproxy_SSL_OP_NO_RENEGOTIATION() | CPinproxy_SSL_OP_CIPHER_SERVER_PREFERENCE()
        if !c.sessionResumption { options |= CPinproxy_SSL_OP_NO_TICKET() }
        SSL_CTX_set_options(ref, options)
        // Idle connections keep no read/write buffers (memory per idle
        // connection). A busy one keeps them while it stays busy
        // (`TLSHandler`, `RecordBufferKeeping`).
        _ = CPinproxy_SSL_CTX_set_mode(ref, Int(SSL_MODE_RELEASE_BUFFERS))
    }

    private func configureCiphers(checkingPolicy: Bool) throws {
        let c = configuration
        if let list = c.cipherList {
            if checkingPolicy {
                try TLSCipherValidation.validateCipherList(list, minimumVersion: c.minimumVersion, maximumVersion: c.maximumVersion)
            }
            OpenSSLErrorQueue.clear()
            // Defence in depth: whatever the string says, this context never
            // offers a cipher that does not encrypt or does not authenticate.
            guard SSL_CTX_set_cipher_list(ref, list + ":!eNULL:!aNULL") == 1 else {
                throw TLSError.configuration("cipher string \"\(list)\": \(OpenSSLErrorQueue.drainReason(or: "no cipher matches"))")
            }
            // Nor does a `@SECLEVEL` in it lower the level (legacy TLS lowers it on purpose, above).
            let floor = c.minimumVersion.isLegacy ? 0 : TLSCipherValidation.defaultSecurityLevel
            if SSL_CTX_get_security_level(ref) < floor { SSL_CTX_set_security_level(ref, floor) }
        }
        if let suites = configuration.cipherSuites {
            try TLSCipherValidation.validateCipherSuites(suites)
            OpenSSLErrorQueue.clear()
            guard SSL_CTX_set_ciphersuites(ref, suites) == 1 else {
                throw TLSError.configuration("TLS 1.3 ciphersuites \"\(suites)\": \(OpenSSLErrorQueue.drainReason(or: "no ciphersuite matches"))")
            }
        }
        if let groups = configuration.groups {
            OpenSSLErrorQueue.clear()
            guard CPinproxy_SSL_CTX_set1_groups_list(ref, groups) == 1 else {
                throw TLSError.configuration("groups \"\(groups)\": \(OpenSSLErrorQueue.drainReason(or: "unknown group"))")
            }
        }
    }

    /// The ciphers a connection from this context offers, after OpenSSL's
    /// filtering (tests of the floor).
    var offeredCiphers: [TLSCipherValidation.CipherFacts] { TLSCipherValidation.usableCiphers(ref) }

    // MARK: Trust and identity

    private func configureTrust(_ trustStores: TrustStoreCache?) throws {
        let c = configuration
        OpenSSLErrorQueue.clear()
        switch c.trustRoots {
        case .system, .file:
            let store = try trustStores?.store(for: c.trustRoots) ?? TrustStore.load(c.trustRoots)
            // Takes a reference: a shared store lives as long as its last context.
            SSL_CTX_set1_cert_store(ref, store.ref)
        case .certificates(let certificates):
            let store = SSL_CTX_get_cert_store(ref)
            for certificate in certificates {
                X509_STORE_add_cert(store, certificate.ref)
            }
        }
        if c.role == .client {
            let mode = c.verification == .full ? SSL_VERIFY_PEER : SSL_VERIFY_NONE
            SSL_CTX_set_verify(ref, mode, nil)
        }
    }

    private func configureIdentity() throws {
        let c = configuration
        guard let leaf = c.certificateChain.first else {
            if c.privateKey != nil {
                throw TLSError.configuration("a private key was given without its certificate")
            }
            return
        }
        guard let key = c.privateKey else {
            throw TLSError.configuration("certificate \(leaf.subject) was given without its private key")
        }
        OpenSSLErrorQueue.clear()
        guard SSL_CTX_use_certificate(ref, leaf.ref) == 1 else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "cannot use certificate \(leaf.subject)"))
        }
        for intermediate in c.certificateChain.dropFirst() {
            X509_up_ref(intermediate.ref)  // the extra chain takes ownership of one reference
            guard CPinproxy_SSL_CTX_add_extra_chain_cert(ref, intermediate.ref) == 1 else {
                X509_free(intermediate.ref)
                throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "cannot add chain certificate \(intermediate.subject)"))
            }
        }
        guard SSL_CTX_use_PrivateKey(ref, key.ref) == 1, SSL_CTX_check_private_key(ref) == 1 else {
            throw TLSError.configuration("private key does not match certificate \(leaf.subject): \(OpenSSLErrorQueue.drainReason(or: "mismatch"))")
        }
    }

    // MARK: ALPN, sessions, callbacks

    private func configureALPN() {
        guard let alpnWire else { return }
        switch configuration.role {
        case .client:
            // Note the inverted convention: 0 is success.
            _ = SSL_CTX_set_alpn_protos(ref, alpnWire.baseAddress! + 4, UInt32(alpnWire.count - 4))
        case .server:
            SSL_CTX_set_alpn_select_cb(ref, { _, out, outLength, offered, offeredLength, arg in
                guard let arg, let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
                let wire = arg.assumingMemoryBound(to: UInt8.self)
                // The wire buffer's length is stored in the first 4 bytes before it; see below.
                let wireLength = arg.advanced(by: -4).loadUnaligned(as: UInt32.self)
                var selected: UnsafeMutablePointer<UInt8>?
                var selectedLength: UInt8 = 0
                let status = SSL_select_next_proto(&selected, &selectedLength, wire, wireLength, offered, offeredLength)
                guard status == OPENSSL_NPN_NEGOTIATED, let selected else { return SSL_TLSEXT_ERR_NOACK }
                out.pointee = UnsafePointer(selected)
                outLength.pointee = selectedLength
                return SSL_TLSEXT_ERR_OK
            }, UnsafeMutableRawPointer(alpnWire.baseAddress!).advanced(by: 4))
        }
    }

    private func configureSessions() {
        switch configuration.role {
        case .client:
            guard sessionCache != nil else {
                _ = CPinproxy_SSL_CTX_set_session_cache_mode(ref, Int(SSL_SESS_CACHE_OFF))
                return
            }
            // OpenSSL never resumes client sessions by itself: we keep them per
            // peer (TLSClientSessionCache) and hand them back with SSL_set_session.
            _ = CPinproxy_SSL_CTX_set_session_cache_mode(ref, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE))
            SSL_CTX_sess_set_new_cb(ref) { ssl, session in
                guard let ssl, let session, let connection = TLSConnection.from(ssl) else { return 0 }
                return connection.storeSession(session) ? 1 : 0
            }
        case .server:
            let id: [UInt8] = Array("pinproxy".utf8)
            _ = SSL_CTX_set_session_id_context(ref, id, UInt32(id.count))
            _ = CPinproxy_SSL_CTX_sess_set_cache_size(ref, 4096)
        }
    }

    private func configureCallbacks() {
        guard configuration.role == .server else { return }
        // Per-connection certificate selection (the interception leg): the
        // callback may pause the handshake; see TLSConnection.certificateCallback.
        SSL_CTX_set_cert_cb(ref, { ssl, _ in
            guard let ssl, let connection = TLSConnection.from(ssl) else { return 1 }
            return connection.certificateCallback()
        }, nil)
    }

    /// Length-prefixed protocol names, preceded by 4 bytes holding the total length
    /// (read back by the server's select callback, which only gets a pointer).
    static func alpnWireFormat(_ protocols: [String]) throws -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw TLSError.configuration("ALPN protocol name \"\(name)\" must be 1 to 255 bytes")
            }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        var length = UInt32(wire.count)
        let prefix = withUnsafeBytes(of: &length) { Array($0) }
        return prefix + wire
    }
}
