import NIOCore
import NIOHTTP1
import PinproxyHTTP1
@testable import PinproxyServer

extension AppRequestHead {
    /// `head` as the app's HTTP/1.1 decoder hands it on: written as its
    /// bytes and read by the head path (`RequestHeadBytes`). A head the head
    /// path refuses (ambiguous framing, a bad byte) is handed on whole, as
    /// it reaches the exchange from an HTTP/2 stream.
    static func read(_ head: HTTPRequestHead) -> AppRequestHead {
        var text = "\(head.method.rawValue) \(head.uri) HTTP/\(head.version.major).\(head.version.minor)\r\n"
        for (name, value) in head.headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        let buffer = ByteBuffer(string: text)
        var reader = MessageReader(parser: HeadParser(kind: .request, maxFieldBytes: 1 << 20, maxFieldCount: 10_000))
        var read: AppRequestHead?
        buffer.withUnsafeReadableBytes { bytes in
            _ = try? reader.read(bytes) { event in
                guard read == nil, case .head(let parsed, let at, let framing) = event else { return }
                read = AppRequestHead(parsed, framing: framing, bytes: buffer.getSlice(at: buffer.readerIndex + at, length: parsed.length)!)
            }
        }
        return read ?? .whole(head)
    }

    /// Whether the head path kept it as bytes.
    var isBytes: Bool {
        if case .bytes = self { return true }
        return false
    }
}
