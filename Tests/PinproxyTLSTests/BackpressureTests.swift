import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Writes `total` bytes of a known pattern, only while the channel is writable,
/// and records the most bytes the channel ever held buffered. Lives on its
/// channel's loop; the test thread reads only the locked `maxBuffered`.
final class PatternWriter: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let total: Int
    private var sent = 0
    let maxBuffered = NIOLockedValueBox(0)
    let finished: EventLoopPromise<Void>

    init(total: Int, finished: EventLoopPromise<Void>) {
        self.total = total
        self.finished = finished
    }

    /// The stream is this block repeated; its prime length makes every chunk
    /// start at a different phase, so a lost or repeated chunk shows.
    static let pattern: [UInt8] = (0..<65_521).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 7) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is TLSUserEvent { pump(context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context: context)
        context.fireChannelWritabilityChanged()
    }

    private func pump(context: ChannelHandlerContext) {
        while context.channel.isWritable && sent < total {
            let size = min(65_536, total - sent)
            var chunk = context.channel.allocator.buffer(capacity: size)
            var offset = sent
            while chunk.readableBytes < size {
                let phase = offset % Self.pattern.count
                let n = min(size - chunk.readableBytes, Self.pattern.count - phase)
                chunk.writeBytes(Self.pattern[phase..<phase + n])
                offset += n
            }
            sent += size
            context.writeAndFlush(wrapOutboundOut(chunk), promise: nil)
            let buffered = (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
            maxBuffered.withLockedValue { $0 = max($0, buffered) }
        }
        if sent == total {
            sent += 1  // once
            context.close(promise: nil)
            finished.succeed()
        }
    }
}

/// Reads slowly (one read a millisecond, autoRead off) and checks every byte.
final class SlowVerifyingReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private(set) var received = 0
    private(set) var mismatches = 0
    let done: EventLoopPromise<(Int, Int)>

    init(done: EventLoopPromise<(Int, Int)>) { self.done = done }

    func channelActive(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            PatternWriter.pattern.withUnsafeBytes { pattern in
                while index < bytes.count {
                    let phase = received % pattern.count
                    let n = min(bytes.count - index, pattern.count - phase)
                    if memcmp(bytes.baseAddress! + index, pattern.baseAddress! + phase, n) != 0 { mismatches += 1 }
                    index += n
                    received += n
                }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(1)) { context.read() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        done.succeed((received, mismatches))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A close without close_notify would show here; the writer closes cleanly.
        done.fail(error)
    }
}

@Suite("Backpressure through a TLS handler pair", .blockingWaits)
struct BackpressureTests {
    @Test func sixtyFourMiBArriveByteExactWhileTheWritersBufferStaysBounded() async throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let total = 64 * 1024 * 1024
        let group = MultiThreadedEventLoopGroup.singleton
        let writerFinished = group.next().makePromise(of: Void.self)
        let writers = NIOLockedValueBox<[PatternWriter]>([])
        let serverContext = try TLSServerTests.staticServerContext(pki)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let writer = PatternWriter(total: total, finished: writerFinished)
                    writers.withLockedValue { $0.append(writer) }
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(serverContext: serverContext))
                    try channel.pipeline.syncOperations.addHandler(writer)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }

        let loop = group.next()
        let done = loop.makePromise(of: (Int, Int).self)
        let clientContext = try TLSContext(configuration: .client(trustRoots: .file(pki.rootCertificate)))
        _ = try await ClientBootstrap(group: loop)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.so_rcvbuf), value: 65_536)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(clientContext: clientContext, serverName: "localhost"))
                    try channel.pipeline.syncOperations.addHandler(SlowVerifyingReader(done: done))
                }
            }
            .connect(host: "127.0.0.1", port: server.port).get()

        let (received, mismatches) = try await done.futureResult.get()
        try await writerFinished.futureResult.get()
        #expect(received == total)
        #expect(mismatches == 0)
        // Bounded by the write high-water mark (64 KiB) plus one chunk's ciphertext,
        // nowhere near the 64 MiB that would pile up without backpressure.
        let maxBuffered = try #require(writers.withLockedValue { $0.first }).maxBuffered.withLockedValue { $0 }
        #expect(maxBuffered < 512 * 1024, "writer buffered up to \(maxBuffered) bytes")
    }
}
