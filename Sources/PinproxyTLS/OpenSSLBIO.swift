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

/// Base64 without Foundation's Data round trips; pins are hashed often.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
