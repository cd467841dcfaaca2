import NIOCore
import NIOEmbedded
import PinproxyTestSupport
@testable import PinproxyTLS
import Testing

/// A busy connection keeps OpenSSL's record buffers between records and
/// gives them back at the first quiet interval; one that is not busy frees
/// them after every record, as the contexts' `SSL_MODE_RELEASE_BUFFERS`
/// says. Driven on two EmbeddedChannels, whose clocks move only when told.
@Suite("TLS record buffers kept while busy", .blockingWaits)
struct RecordBufferReleaseTests {
    static let interval = RecordBufferKeeping.quietInterval

    static func handler(_ channel: EmbeddedChannel) throws -> TLSHandler {
        try channel.pipeline.syncOperations.handler(type: TLSHandler.self)
    }

    static func advance(_ pair: HandlerPairTests.Pair, by amount: TimeAmount) {
        pair.client.embeddedEventLoop.advanceTime(by: amount)
        pair.server.embeddedEventLoop.advanceTime(by: amount)
    }

    /// One request and one answer, as a keep-alive exchange has: a record each way.
    static func exchange(_ pair: HandlerPairTests.Pair, _ request: String, _ answer: String) throws {
        pair.client.writeAndFlush(ByteBuffer(string: request), promise: nil)
        try pair.interact()
        pair.server.writeAndFlush(ByteBuffer(string: answer), promise: nil)
        try pair.interact()
    }

    @Test func aConnectionWithARequestNowAndThenNeverKeepsThem() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let client = try Self.handler(pair.client), server = try Self.handler(pair.server)
        for round in 0..<20 {
            try Self.exchange(pair, "q\(round) ", "a\(round) ")
            Self.advance(pair, by: Self.interval)
            #expect(!client.keepsRecordBuffers && !server.keepsRecordBuffers, "round \(round)")
        }
        #expect(pair.serverSaw.text == (0..<20).map { "q\($0) " }.joined())
        #expect(client.buffersReleased == 0 && server.buffersReleased == 0)
    }

    @Test func aBusyConnectionKeepsThemUntilAQuietIntervalAndStillCarriesRecordsAfterwards() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        let client = try Self.handler(pair.client), server = try Self.handler(pair.server)
        // Four exchanges at once: busy on both sides.
        for round in 0..<4 { try Self.exchange(pair, "q\(round) ", "a\(round) ") }
        #expect(client.keepsRecordBuffers && server.keepsRecordBuffers)

        // Four more every interval: still busy at every check.
        for round in 4..<40 {
            try Self.exchange(pair, "q\(round) ", "a\(round) ")
            if round % 4 == 3 { Self.advance(pair, by: Self.interval) }
        }
        #expect(client.keepsRecordBuffers && server.keepsRecordBuffers)
        #expect(client.buffersReleased == 0 && server.buffersReleased == 0)

        // A quiet interval: both give them back.
        Self.advance(pair, by: Self.interval)
        #expect(!client.keepsRecordBuffers && !server.keepsRecordBuffers)
        #expect(client.buffersReleased == 1 && server.buffersReleased == 1)

        // OpenSSL takes buffers again for the next records, both ways.
        try Self.exchange(pair, "again", "and again")
        #expect(pair.serverSaw.text == (0..<40).map { "q\($0) " }.joined() + "again")
        #expect(pair.clientSaw.text == (0..<40).map { "a\($0) " }.joined() + "and again")
        #expect(pair.clientSaw.errors.isEmpty && pair.serverSaw.errors.isEmpty)
    }

    @Test func partOfARecordInAKeptBufferIsNotFreedAndArrivesWhole() throws {
        let (pair, _) = try HandlerPairTests.makePair()
        defer { pair.finish() }
        for round in 0..<4 { try Self.exchange(pair, "q\(round) ", "a\(round) ") }
        let server = try Self.handler(pair.server)
        #expect(server.keepsRecordBuffers)

        // A record's first half, then a quiet interval: OpenSSL holds the
        // half in its read buffer, so it must not be freed.
        pair.client.writeAndFlush(ByteBuffer(string: "a record that arrives in two parts"), promise: nil)
        var ciphertext = try #require(try pair.client.readOutbound(as: ByteBuffer.self))
        let firstHalf = ciphertext.readSlice(length: ciphertext.readableBytes / 2)!
        try pair.server.writeInbound(firstHalf)
        Self.advance(pair, by: Self.interval * 2)
        #expect(!server.keepsRecordBuffers)
        #expect(server.buffersReleased == 0, "freed with half a record in it")

        try pair.server.writeInbound(ciphertext)
        try pair.interact()
        #expect(pair.serverSaw.text == "q0 q1 q2 q3 a record that arrives in two parts")
        #expect(pair.serverSaw.errors.isEmpty)
    }
}
