import COpenSSL

/// Judges a policy's cipher string by what OpenSSL makes of it, never by
/// reading the text. OpenSSL accepts a string as long as *one* element
/// matches, silently ignoring the rest ("ECDHE+AESGCM:TYPO" is taken as
/// "ECDHE+AESGCM"), so every positive element is checked on its own. Then
/// the string is expanded on a scratch context set up as the real one will
/// be, and refused (docs/contract.md §3, "Errors and warnings") when it lowers
/// `@SECLEVEL` below OpenSSL's default, when a cipher it leaves usable does
/// not encrypt (eNULL) or does not authenticate the server (aNULL), or when
/// it leaves no cipher usable at all.
enum TLSCipherValidation {
    /// What the fix looks like, in every refusal.
    static let suggestion = "\"ECDHE+AESGCM:ECDHE+CHACHA20\""

    /// A scratch client context, freed after `body`.
    private static func withScratch<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        let ctx = SSL_CTX_new(TLS_client_method())!
        defer { SSL_CTX_free(ctx) }
        return try body(ctx)
    }

    /// OpenSSL's security level for a context nothing has lowered (openssl.cnf included).
    static var defaultSecurityLevel: Int32 {
        withScratch { SSL_CTX_get_security_level($0) }
    }

    static func validateCipherList(_ list: String, minimumVersion: TLSVersion = .v1_2, maximumVersion: TLSVersion? = nil) throws {
        let elements = list.split(whereSeparator: { ":, ".contains($0) }).map(String.init)
        guard !elements.isEmpty else {
            throw TLSError.configuration("cipher string is empty")
        }
        try withScratch { ctx in
            // Level 0 so that a weak but real cipher is judged as known, not as absent.
            SSL_CTX_set_security_level(ctx, 0)
            for element in elements {
                // "!x", "-x" remove and "+x" moves: they act on what is there and
                // match nothing alone. "@STRENGTH" / "@SECLEVEL=n" are commands.
                if element.hasPrefix("!") || element.hasPrefix("-") || element.hasPrefix("@") { continue }
                let probe = element.hasPrefix("+") ? String(element.dropFirst()) : element
                OpenSSLErrorQueue.clear()
                if SSL_CTX_set_cipher_list(ctx, probe) != 1 {
                    let reason = OpenSSLErrorQueue.drainReason(or: "no cipher match")
                    throw TLSError.configuration("cipher string element \"\(element)\" matches no cipher OpenSSL knows (\(reason))")
                }
            }
        }
        try withScratch { ctx in
            let defaultLevel = SSL_CTX_get_security_level(ctx)
            OpenSSLErrorQueue.clear()
            if SSL_CTX_set_cipher_list(ctx, list) != 1 {
                let reason = OpenSSLErrorQueue.drainReason(or: "no cipher match")
                throw TLSError.configuration("cipher string \"\(list)\" selects no cipher (\(reason))")
            }
            let level = SSL_CTX_get_security_level(ctx)
            if level < defaultLevel {
                let command = elements.last { $0.uppercased().hasPrefix("@SECLEVEL") } ?? "@SECLEVEL=\(level)"
                throw TLSError.configuration(
                    "cipher string \"\(list)\" lowers the security level to \(level), below OpenSSL's default \(defaultLevel), "
                    + "which lets ciphers without encryption or authentication through: remove \"\(command)\"")
            }
            // The real context's version range and level (legacy TLS runs at 0).
            if minimumVersion.isLegacy { SSL_CTX_set_security_level(ctx, 0) }
            _ = CPinproxy_SSL_CTX_set_min_proto_version(ctx, minimumVersion.openSSLValue)
            if let maximumVersion { _ = CPinproxy_SSL_CTX_set_max_proto_version(ctx, maximumVersion.openSSLValue) }
            let usable = usableCiphers(ctx)
            if let unsafe = usable.first(where: { !$0.encrypts || !$0.authenticates }) {
                let what = unsafe.encrypts ? "does not authenticate the server (aNULL)" : "does not encrypt (eNULL)"
                throw TLSError.configuration(
                    "cipher string \"\(list)\" admits \(unsafe.name), which \(what): append \":!eNULL:!aNULL\" or list only "
                    + "authenticated, encrypting ciphers such as \(suggestion)")
            }
            let upToTLS12 = usable.filter { !$0.isTLS13 }
            if upToTLS12.isEmpty, minimumVersion <= .v1_2 {
                throw TLSError.configuration(
                    "cipher string \"\(list)\" leaves no cipher usable for TLS 1.2 and below at security level "
                    + "\(SSL_CTX_get_security_level(ctx)): list ciphers such as \(suggestion)")
            }
        }
    }

    struct CipherFacts {
        var name: String
        var encrypts: Bool
        var authenticates: Bool
        var isTLS13: Bool
    }

    /// The ciphers a connection from `ctx` would offer: the list after
    /// OpenSSL's own filtering by version range and security level.
    static func usableCiphers(_ ctx: OpaquePointer) -> [CipherFacts] {
        guard let ssl = SSL_new(ctx) else { return [] }
        defer { SSL_free(ssl) }
        guard let stack = SSL_get1_supported_ciphers(ssl) else { return [] }
        defer { CPinproxy_sk_SSL_CIPHER_free(stack) }
        return (0..<CPinproxy_sk_SSL_CIPHER_num(stack)).compactMap { index in
            CPinproxy_sk_SSL_CIPHER_value(stack, index).map(facts)
        }
    }

    /// Every cipher in the context's configured list, before any filtering.
    static func configuredCiphers(_ ctx: OpaquePointer) -> [CipherFacts] {
        guard let stack = SSL_CTX_get_ciphers(ctx) else { return [] }
        return (0..<CPinproxy_sk_SSL_CIPHER_num(stack)).compactMap { index in
            CPinproxy_sk_SSL_CIPHER_value(stack, index).map(facts)
        }
    }

    private static func facts(_ cipher: OpaquePointer) -> CipherFacts {
        CipherFacts(
            name: String(cString: SSL_CIPHER_get_name(cipher)),
            encrypts: SSL_CIPHER_get_cipher_nid(cipher) != NID_undef,
            authenticates: SSL_CIPHER_get_auth_nid(cipher) != NID_auth_null,
            isTLS13: SSL_CIPHER_get_kx_nid(cipher) == NID_kx_any)
    }

    static let knownCipherSuites: Set<String> = [
        "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256",
    ]

    static func validateCipherSuites(_ suites: String) throws {
        let names = suites.split(separator: ":").map(String.init)
        guard !names.isEmpty else {
            throw TLSError.configuration("TLS 1.3 ciphersuites list is empty")
        }
        for name in names where !knownCipherSuites.contains(name) {
            let nearest = knownCipherSuites.sorted().first { $0.lowercased() == name.lowercased() }
            let hint = nearest.map { " (did you mean \($0)?)" } ?? " (known: \(knownCipherSuites.sorted().joined(separator: ", ")))"
            throw TLSError.configuration("unknown TLS 1.3 ciphersuite \"\(name)\"\(hint)")
        }
    }
}
