import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import PinproxyServer

/// `HeadersOnlyResponseMerger` on an `EmbeddedChannel`: what an app stream's
/// frames look like after it, for each way a response can end.
@Suite("Headers-only response merger")
struct HeadersOnlyResponseMergerTests {
    static func headers(_ status: String, end: Bool = false) -> HTTP2Frame.FramePayload {
        .headers(.init(headers: HPACKHeaders([(":status", status)]), endStream: end))
    }

    static func data(_ count: Int, end: Bool) -> HTTP2Frame.FramePayload {
        .data(.init(data: .byteBuffer(ByteBuffer(repeating: 0x61, count: count)), endStream: end))
    }

    /// Writes `payloads` (flushing after those listed), returns the frames that left, described.
    static func run(_ payloads: [HTTP2Frame.FramePayload], flushAfter: Set<Int> = []) throws -> [String] {
        let channel = EmbeddedChannel(handler: HeadersOnlyResponseMerger())
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        for (index, payload) in payloads.enumerated() {
            channel.write(payload, promise: nil)
            if flushAfter.contains(index) { channel.flush() }
        }
        channel.flush()
        var out: [String] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) {
            switch frame {
            case .headers(let headers): out.append("HEADERS\(headers.endStream ? "+END" : "")")
            case .data(let data): out.append("DATA(\(data.data.readableBytes))\(data.endStream ? "+END" : "")")
            default: out.append("other")
            }
        }
        return out
    }

    @Test func aHeadFollowedAtOnceByItsEndIsOneHeadersFrameWithEndStream() throws {
        // gRPC's trailers-only answer: the status in the head, nothing after it.
        #expect(try Self.run([Self.headers("200"), Self.data(0, end: true)]) == ["HEADERS+END"])
    }

    @Test func aHeadWithABodyKeepsItsFramesAsTheyWere() throws {
        #expect(try Self.run([Self.headers("200"), Self.data(5, end: false), Self.data(0, end: true)])
                == ["HEADERS", "DATA(5)", "DATA(0)+END"])
        #expect(try Self.run([Self.headers("200"), Self.data(3, end: true)]) == ["HEADERS", "DATA(3)+END"])
    }

    @Test func aFlushBetweenHeadAndEndSendsTheHeadAlone() throws {
        // The head is not held past a flush: a slow response's head reaches the app at once.
        #expect(try Self.run([Self.headers("200"), Self.data(0, end: true)], flushAfter: [0]) == ["HEADERS", "DATA(0)+END"])
    }

    @Test func aHeadThatEndsTheStreamItselfPassesUnchanged() throws {
        #expect(try Self.run([Self.headers("204", end: true)]) == ["HEADERS+END"])
    }
}
