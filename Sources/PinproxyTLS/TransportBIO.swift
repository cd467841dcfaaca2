import COpenSSL
import NIOCore

/// The ciphertext of one TLS connection on its way between the socket and
/// OpenSSL, as a BIO of our own: OpenSSL reads records straight out of the
/// `ByteBuffer` the channel read, and writes them straight into the one the
/// channel will write.
///
/// A memory BIO (`BIO_s_mem`) costs two more passes over every byte each
/// way: it zeroes the room it grows into and copies the bytes in, then they
/// are copied out again. On 1 MiB bodies that was about a tenth of the
/// proxy's CPU beside the cipher itself.
///
/// Used only on its channel's event loop, like the `TLSConnection` that
/// owns it. This object holds one reference to the BIO and the SSL another
/// (`attach`); the BIO points back here unretained, and `detach` clears
/// that before the SSL is freed.
final class TransportBIO {
    let bio: OpaquePointer
    /// Ciphertext from the network that OpenSSL has not taken yet.
    private var input: ByteBuffer?
    /// Ciphertext OpenSSL wrote that the network has not taken yet.
    private var output: ByteBuffer?
    private let allocator = ByteBufferAllocator()

    init() {
        bio = BIO_new(Self.method)!
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        BIO_set_init(bio, 1)
    }

    deinit {
        BIO_free(bio)
    }

    /// Gives `ssl` the BIO for both directions; it takes a reference of its own.
    func attach(to ssl: OpaquePointer) {
        BIO_up_ref(bio)
        SSL_set_bio(ssl, bio, bio)  // the same BIO both ways: one reference taken
    }

    /// Called before the SSL is freed: OpenSSL can no longer reach this object.
    func detach() {
        BIO_set_data(bio, nil)
    }

    // MARK: The network's side

    /// Queues ciphertext for OpenSSL to read; no copy unless some of the
    /// last burst is still unread.
    func feed(_ buffer: ByteBuffer) {
        guard buffer.readableBytes > 0 else { return }
        if var rest = input, rest.readableBytes > 0 {
            rest.writeImmutableBuffer(buffer)
            input = rest
        } else {
            input = buffer
        }
    }

    var hasInput: Bool { (input?.readableBytes ?? 0) > 0 }

    var hasOutput: Bool { (output?.readableBytes ?? 0) > 0 }

    /// Makes room for what encrypting `plaintext` bytes will write, so that a
    /// large flush does not grow the buffer (and copy it) step by step.
    func reserveOutput(forPlaintext plaintext: Int) {
        // A TLS 1.3 record adds 22 bytes (header, type, tag) per 16 KiB.
        let needed = plaintext + (plaintext / 16384 + 1) * 22
        if output == nil { output = allocator.buffer(capacity: needed) } else { output!.reserveCapacity(minimumWritableBytes: needed) }
    }

    /// Everything OpenSSL wrote since the last call, or nil.
    func takeOutput() -> ByteBuffer? {
        guard let output, output.readableBytes > 0 else { return nil }
        self.output = nil
        return output
    }

    // MARK: OpenSSL's side

    /// OpenSSL's read: up to `count` bytes of what was fed, in order; -1 when
    /// there is nothing (the BIO then says "retry": wait for more).
    func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int32 {
        guard count > 0, let available = input?.readableBytes, available > 0 else { return -1 }
        let taken = min(count, available)
        input!.readWithUnsafeReadableBytes { bytes in
            destination.copyMemory(from: bytes.baseAddress!, byteCount: taken)
            return taken
        }
        if taken == available { input = nil }  // the channel's buffer goes back now
        return Int32(taken)
    }

    /// OpenSSL's write: always all of it, appended for the network.
    func write(from source: UnsafeRawPointer, count: Int) -> Int32 {
        if output == nil { output = allocator.buffer(capacity: max(count, 1024)) }
        output!.writeBytes(UnsafeRawBufferPointer(start: source, count: count))
        return Int32(count)
    }

    private static func from(_ bio: OpaquePointer?) -> TransportBIO? {
        guard let bio, let data = BIO_get_data(bio) else { return nil }
        return Unmanaged<TransportBIO>.fromOpaque(data).takeUnretainedValue()
    }

    /// One method for every connection, made on first use (thread-safe, as
    /// any `static let`) and never changed after: safe to share.
    nonisolated(unsafe) private static let method: OpaquePointer = {
        let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pinproxy transport")!
        _ = BIO_meth_set_read(method) { bio, destination, count in
            CPinproxy_BIO_clear_retry_flags(bio)
            guard let transport = TransportBIO.from(bio), let destination else { return -1 }
            let read = transport.read(into: destination, count: Int(count))
            // Nothing yet means "wait for more", never EOF: the transport's EOF
            // is the handler's business (it decides clean vs unclean).
            if read < 0 { CPinproxy_BIO_set_retry_read(bio) }
            return read
        }
        _ = BIO_meth_set_write(method) { bio, source, count in
            CPinproxy_BIO_clear_retry_flags(bio)
            guard let transport = TransportBIO.from(bio), let source, count >= 0 else { return -1 }
            return transport.write(from: source, count: Int(count))
        }
        _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
            switch command {
            case BIO_CTRL_FLUSH: return 1  // written bytes are already the network's
            case BIO_CTRL_PENDING: return TransportBIO.from(bio)?.input.map { $0.readableBytes } ?? 0
            case BIO_CTRL_WPENDING: return TransportBIO.from(bio)?.output.map { $0.readableBytes } ?? 0
            default: return 0
            }
        }
        return method
    }()
}
