import NIOCore
import NIOEmbedded
import Testing

@testable import PinproxyServer

/// `GlueHandler` between two `EmbeddedChannel`s on one loop: what crosses
/// over (bytes, flushes, closes) and how a side that cannot write holds the
/// other's reads back.
@Suite("Glue handler")
struct GlueHandlerTests {
    /// Counts the reads a side asks its channel for (it sits below the glue).
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    struct Pair {
        let loop = EmbeddedEventLoop()
        let app: EmbeddedChannel
        let upstream: EmbeddedChannel
        let appReads = ReadCounter()
        let glue: (app: GlueHandler, upstream: GlueHandler)

        init() throws {
            let (first, second) = GlueHandler.matchedPair()
            glue = (first, second)
            app = EmbeddedChannel(loop: loop)
            upstream = EmbeddedChannel(loop: loop)
            try app.pipeline.syncOperations.addHandler(appReads)
            try app.pipeline.syncOperations.addHandler(first)
            try upstream.pipeline.syncOperations.addHandler(second)
            try app.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try upstream.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        }

        func finish() {
            _ = try? app.finish(acceptAlreadyClosed: true)
            _ = try? upstream.finish(acceptAlreadyClosed: true)
        }
    }

    @Test func bytesCrossOverAndAreFlushedAtTheEndOfARead() throws {
        let pair = try Pair()
        defer { pair.finish() }
        try pair.app.writeInbound(ByteBuffer(string: "hello "))
        try pair.app.writeInbound(ByteBuffer(string: "upstream"))
        var sent = ""
        while let buffer = try pair.upstream.readOutbound(as: ByteBuffer.self) { sent += String(buffer: buffer) }
        #expect(sent == "hello upstream")
        #expect(pair.glue.app.bytesRelayed == 14)
        try pair.upstream.writeInbound(ByteBuffer(string: "answer"))
        #expect(try pair.app.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "answer")
    }

    @Test func aSideThatCannotWriteHoldsTheOthersReadsBackUntilItCan() throws {
        let pair = try Pair()
        defer { pair.finish() }
        let before = pair.appReads.reads
        pair.upstream.isWritable = false
        pair.app.read()
        #expect(pair.appReads.reads == before, "no read while the upstream cannot take the bytes")
        pair.upstream.isWritable = true
        pair.upstream.pipeline.fireChannelWritabilityChanged()
        #expect(pair.appReads.reads == before + 1, "the withheld read goes out once it can")
        pair.app.read()
        #expect(pair.appReads.reads == before + 2)
    }

    @Test func aCloseOnOneSideClosesTheOther() throws {
        let pair = try Pair()
        defer { pair.finish() }
        var closed = false
        pair.glue.app.onClose = { closed = true }
        try pair.app.close().wait()
        #expect(closed)
        #expect(!pair.upstream.isActive)
    }
}
