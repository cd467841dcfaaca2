import NIOCore
import NIOEmbedded
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// `TLSHandler.flushBufferedWrites`: the small writes of one flush (up to
/// 2,048 bytes each) share one TLS record (up to 16,384 bytes of plaintext);
/// a larger write goes on its own, uncopied (OpenSSL cuts it into full records). Read off the
/// ciphertext one side emits, record header by record header.
@Suite("TLS record gathering", .blockingWaits)
struct TLSRecordGatheringTests {
    struct Record: CustomStringConvertible {
        var type: UInt8
        var version: UInt16
        var length: Int
        var description: String { "type \(type) length \(length)" }
    }

    static let applicationData: UInt8 = 23
    static let recordPayload = 16_384

    /// Everything `channel` has written since the last read, as one buffer.
    static func drainOutbound(_ channel: EmbeddedChannel) throws -> ByteBuffer {
        var all = ByteBuffer()
        while var chunk = try channel.readOutbound(as: ByteBuffer.self) {
            all.writeBuffer(&chunk)
        }
        return all
    }

    /// The TLS record headers in `ciphertext`, which must hold whole records only.
    static func records(in ciphertext: ByteBuffer) throws -> [Record] {
        var buffer = ciphertext
        var records: [Record] = []
        while buffer.readableBytes > 0 {
            guard let type = buffer.readInteger(as: UInt8.self), let version = buffer.readInteger(as: UInt16.self),
                  let length = buffer.readInteger(as: UInt16.self).map(Int.init) else {
                throw TestSupportError("a truncated record header")
            }
            try #require(buffer.readableBytes >= length, "a record of \(length) bytes with \(buffer.readableBytes) left")
            buffer.moveReaderIndex(forwardBy: length)
            records.append(Record(type: type, version: version, length: length))
        }
        return records
    }

    /// `count` bytes of the test pattern from `offset`.
    static func pattern(_ offset: Int, _ count: Int) -> ByteBuffer {
        ByteBuffer(bytes: TestPattern.slice(at: offset, count: count))
    }

    /// Writes `sizes` from `sender` (consecutive slices of the pattern), flushes
    /// once, and returns the records that flush produced; the peer has read them
    /// and the caller checks what it decrypted against the pattern.
    static func writeAndFlush(_ sizes: [Int], from sender: EmbeddedChannel, to receiver: EmbeddedChannel) throws
        -> (records: [Record], promises: [EventLoopFuture<Void>])
    {
        #expect(try drainOutbound(sender).readableBytes == 0, "nothing else on the wire before the flush")
        var offset = 0
        var promises: [EventLoopFuture<Void>] = []
        for size in sizes {
            let promise = sender.eventLoop.makePromise(of: Void.self)
            sender.write(pattern(offset, size), promise: promise)
            promises.append(promise.futureResult)
            offset += size
        }
        #expect(try drainOutbound(sender).readableBytes == 0, "nothing is encrypted before the flush")
        sender.flush()
        let ciphertext = try drainOutbound(sender)
        let records = try records(in: ciphertext)
        try receiver.writeInbound(ciphertext)
        receiver.embeddedEventLoop.run()
        sender.embeddedEventLoop.run()
        return (records, promises)
    }

    /// Records' lengths minus their expected plaintext sizes: one constant (the
    /// AEAD overhead, whatever the cipher) when the records carry exactly those sizes.
    static func carry(_ records: [Record], exactly plaintext: [Int]) -> Bool {
        guard records.count == plaintext.count else { return false }
        let overheads = Set(zip(records, plaintext).map { $0.length - $1 })
        guard overheads.count == 1, let overhead = overheads.first else { return false }
        return overhead > 0 && overhead < 256
    }

    // MARK: Tests

    @Test func smallWritesOfOneFlushShareOneRecord() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let sizes = [100, 200, 300]
        let (records, promises) = try Self.writeAndFlush(sizes, from: pair.client, to: pair.server)
        #expect(records.count == 1, "\(records)")
        #expect(records.allSatisfy { $0.type == Self.applicationData }, "\(records)")
        #expect(Self.carry(records, exactly: [600]), "\(records)")
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: 600))
        for promise in promises { #expect(throws: Never.self) { try promise.wait() } }
        #expect(pair.clientSaw.errors.isEmpty && pair.serverSaw.errors.isEmpty)
    }

    @Test func theServerSideGathersToo() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        // A first exchange, so whatever the server sends once (session tickets) is behind us.
        pair.client.writeAndFlush(ByteBuffer(string: "hello"), promise: nil)
        try pair.interact()
        pair.server.writeAndFlush(ByteBuffer(string: "hi"), promise: nil)
        try pair.interact()
        #expect(pair.clientSaw.text == "hi")

        let (records, _) = try Self.writeAndFlush([17, 1, 2_000, 250], from: pair.server, to: pair.client)
        #expect(records.count == 1, "\(records)")
        #expect(records.first?.type == Self.applicationData)
        #expect(Self.carry(records, exactly: [2_268]), "\(records)")
        #expect(pair.clientSaw.bytes == Array("hi".utf8) + TestPattern.slice(at: 0, count: 2_268))
    }

    @Test func aRecordSizedWriteGoesAloneAndTheSmallOneAfterItGetsItsOwnRecord() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let (records, promises) = try Self.writeAndFlush([40_000, 10], from: pair.client, to: pair.server)
        // 40,000 bytes alone: 16,384 + 16,384 + 7,232; then the 10 bytes.
        #expect(records.count == 4, "\(records)")
        #expect(records.allSatisfy { $0.type == Self.applicationData }, "\(records)")
        #expect(Self.carry(records, exactly: [16_384, 16_384, 7_232, 10]), "\(records)")
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: 40_010))
        for promise in promises { #expect(throws: Never.self) { try promise.wait() } }
    }

    @Test func smallWritesBeforeABigOneGoOutFirstInTheirOwnRecord() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let (records, _) = try Self.writeAndFlush([10, 20, Self.recordPayload, 5], from: pair.client, to: pair.server)
        // [10+20], [16,384 exactly: a record's size goes alone], [5]
        #expect(Self.carry(records, exactly: [30, 16_384, 5]), "\(records)")
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: 16_419))
    }

    @Test func aGatheredRecordNeverExceedsTheRecordPayload() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        // 2,000-byte writes: eight fill 16,000 bytes; a ninth would pass 16,384, so it starts the next record.
        let sizes = [Int](repeating: 2_000, count: 10) + [16_383, 1, 1]
        let (records, _) = try Self.writeAndFlush(sizes, from: pair.client, to: pair.server)
        // [8 × 2,000], [2 × 2,000], then 16,383 (too large to gather) alone, then [1 + 1]
        #expect(Self.carry(records, exactly: [16_000, 4_000, 16_383, 2]), "\(records)")
        #expect(records.allSatisfy { $0.length <= Self.recordPayload + 256 })
        let total = sizes.reduce(0, +)
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: total))
    }

    @Test func aWriteLargerThanTheGatherLimitIsNotCopiedIntoItsNeighbours() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let (records, _) = try Self.writeAndFlush([100, 2_049, 100], from: pair.client, to: pair.server)
        #expect(Self.carry(records, exactly: [100, 2_049, 100]), "\(records)")
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: 2_249))
    }

    @Test func separateFlushesAreSeparateRecords() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let first = try Self.writeAndFlush([100], from: pair.client, to: pair.server)
        #expect(first.records.count == 1)
        // The next flush: a fresh record, not held back to gather with later writes.
        pair.client.write(Self.pattern(100, 50), promise: nil)
        pair.client.flush()
        let second = try Self.records(in: try Self.drainOutbound(pair.client))
        #expect(second.count == 1, "\(second)")
        pair.client.write(Self.pattern(150, 50), promise: nil)
        #expect(try Self.drainOutbound(pair.client).readableBytes == 0, "an unflushed write stays buffered")
    }

    @Test func manyTinyWritesOfOneFlushAreOneRecord() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let sizes = [Int](repeating: 1, count: 500)
        let (records, promises) = try Self.writeAndFlush(sizes, from: pair.client, to: pair.server)
        #expect(Self.carry(records, exactly: [500]), "\(records.count) records, e.g. \(records.prefix(3))")
        #expect(pair.serverSaw.bytes == TestPattern.slice(at: 0, count: 500))
        // One ciphertext write completes all 500 promises.
        for promise in promises { #expect(throws: Never.self) { try promise.wait() } }
    }
}
