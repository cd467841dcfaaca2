import COpenSSL

/// One `EVP_CIPHER_CTX`, freed when the value goes: the only place the
/// symmetric ciphers touch OpenSSL's cipher API. Each step answers whether
/// OpenSSL accepted it; the cipher types decide what a refusal means.
///
/// Output buffers are sized here, from the input and the largest block
/// OpenSSL may hold back, so no caller computes room for OpenSSL to write in.
struct CipherContext: ~Copyable {
    private let ref: OpaquePointer

    /// Begins an operation with `cipher`; the key and IV follow in `setKey`.
    init(_ cipher: OpaquePointer?, encrypting: Bool) {
        OpenSSLErrorQueue.clear()
        guard let ref = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new: out of memory") }
        self.ref = ref
        started = EVP_CipherInit_ex(ref, cipher, nil, nil, nil, encrypting ? 1 : 0) == 1
    }

    deinit {
        EVP_CIPHER_CTX_free(ref)
        // A failed tag or padding check leaves entries on this thread's queue:
        // they must not be blamed on the next TLS call here.
        OpenSSLErrorQueue.clear()
    }

    /// False when OpenSSL refused the cipher itself (a provider without it).
    let started: Bool

    /// For AEAD ciphers: the nonce length, before `setKey`.
    func setIVLength(_ length: Int) -> Bool {
        EVP_CIPHER_CTX_ctrl(ref, EVP_CTRL_AEAD_SET_IVLEN, Int32(length), nil) == 1
    }

    func setKey(_ key: [UInt8], iv: [UInt8]) -> Bool {
        EVP_CipherInit_ex(ref, nil, nil, key, iv, -1) == 1
    }

    /// For AEAD ciphers: data that is authenticated but not encrypted.
    func authenticate(_ aad: [UInt8]) -> Bool {
        guard !aad.isEmpty else { return true }
        var length: Int32 = 0
        return EVP_CipherUpdate(ref, nil, &length, aad, Int32(aad.count)) == 1
    }

    /// What OpenSSL gives back for `input` (possibly fewer bytes: a block
    /// cipher holds the last block back until `finish`).
    func update(_ input: [UInt8]) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: input.count + Int(EVP_MAX_BLOCK_LENGTH))
        var length: Int32 = 0
        guard EVP_CipherUpdate(ref, &output, &length, input, Int32(input.count)) == 1 else { return nil }
        return Array(output.prefix(Int(length)))
    }

    /// The last bytes; nil when a check fails (GCM's tag, CBC's padding).
    func finish() -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_BLOCK_LENGTH))
        var length: Int32 = 0
        guard EVP_CipherFinal_ex(ref, &output, &length) == 1 else { return nil }
        return Array(output.prefix(Int(length)))
    }

    /// For AEAD ciphers, after `finish` when encrypting: the tag.
    func tag(length: Int) -> [UInt8]? {
        var tag = [UInt8](repeating: 0, count: length)
        guard EVP_CIPHER_CTX_ctrl(ref, EVP_CTRL_AEAD_GET_TAG, Int32(length), &tag) == 1 else { return nil }
        return tag
    }

    /// For AEAD ciphers, before `finish` when decrypting: the tag to check.
    func expectTag(_ tag: [UInt8]) -> Bool {
        var tag = tag
        return EVP_CIPHER_CTX_ctrl(ref, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), &tag) == 1
    }
}
