import COpenSSL

/// OpenSSL accepts a cipher string as long as *one* element matches, silently
/// ignoring the rest: "ECDHE+AESGCM:TYPO" is taken as "ECDHE+AESGCM". A policy
/// must not half-apply, so every positive element is checked on its own.
enum TLSCipherValidation {
    /// A scratch context to try cipher strings against.
    private static func withProbe<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T {
        let ctx = SSL_CTX_new(TLS_client_method())!
        defer { SSL_CTX_free(ctx) }
        // Level 0 so that a weak but real cipher is judged as known, not as absent.
        SSL_CTX_set_security_level(ctx, 0)
        return try body(ctx)
    }

    static func validateCipherList(_ list: String) throws {
        let elements = list.split(whereSeparator: { ":, ".contains($0) }).map(String.init)
        guard !elements.isEmpty else {
            throw TLSError.configuration("cipher string is empty")
        }
        try withProbe { ctx in
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
            OpenSSLErrorQueue.clear()
            if SSL_CTX_set_cipher_list(ctx, list) != 1 {
                let reason = OpenSSLErrorQueue.drainReason(or: "no cipher match")
                throw TLSError.configuration("cipher string \"\(list)\" selects no cipher (\(reason))")
            }
        }
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
