import NIOCore
import NIOEmbedded
import NIOHTTP2

/// What an h2 stream adapter writes, described one frame a string
/// (`HEADERS(name=value,…)+END`, `DATA(bytes)+END`): for the app side's and
/// the upstream side's adapter tests alike.
enum StreamAdapterFrames {
    static func describe(_ frame: HTTP2Frame.FramePayload) -> String {
        switch frame {
        case .headers(let headers):
            let fields = headers.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
            return "HEADERS(\(fields))\(headers.endStream ? "+END" : "")"
        case .data(let data): return "DATA(\(data.data.readableBytes))\(data.endStream ? "+END" : "")"
        default: return "other"
        }
    }

    /// Writes `parts` through `handler` on an embedded channel (flushing
    /// after those listed, and at the end); returns the frames that left.
    static func written<Part>(by handler: any ChannelHandler, _ parts: [Part], flushAfter: Set<Int>) throws -> [String] {
        let channel = EmbeddedChannel(handler: handler)
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        for (index, part) in parts.enumerated() {
            channel.write(part, promise: nil)
            if flushAfter.contains(index) { channel.flush() }
        }
        channel.flush()
        var out: [String] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) { out.append(describe(frame)) }
        return out
    }
}
