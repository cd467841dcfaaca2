import COpenSSL

/// Small helpers for moving bytes through OpenSSL memory BIOs.
enum MemoryBIO {
    /// A read-only BIO over a copy of `bytes`, freed when `body` returns.
    static func withReadOnly<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) throws -> T {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        let written = bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
        guard written == bytes.count || bytes.isEmpty else {
            throw TLSError.configuration("could not buffer \(bytes.count) bytes for OpenSSL")
        }
        return try body(bio)
    }

    /// Runs `body` against a fresh writable BIO and returns what it wrote.
    static func collect(_ body: (OpaquePointer) -> Int32) throws -> [UInt8] {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        OpenSSLErrorQueue.clear()
        guard body(bio) == 1 else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "OpenSSL could not encode the object"))
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = CPinproxy_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }
}
