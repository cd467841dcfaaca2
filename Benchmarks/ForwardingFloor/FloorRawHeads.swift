// `pinproxy-floor --raw-heads` (bench/run's "floor-rawheads"): between the
// splice and the floor. The spliced bytes are cut at each message's head,
// each head is copied on without its `Connection` field (the one rewrite
// every proxy makes), and a `Content-Length` body is passed on uncut. That
// is the least work an HTTP/1 head path can do, with no `HTTPHeaders`, no
// strings and no parts, so it estimates what a purpose-built head path
// (issue 33, item 4) would cost against NIO's codec. It is a measuring stick
// only: no validation, no chunked bodies (an app or upstream that sends one
// is cut off), nothing a proxy could be built on.
//
// `--parsed-heads` (bench/run's "floor-parsedheads") adds the validation:
// each head goes through pinproxy's `HeadParser` and its framing rules
// (PinproxyHTTP1, differentially tested against NIO's decoder), and is
// written again from the parsed spans. Against `--raw-heads` it is what
// reading a head as strictly as NIO does costs.
import NIOCore
import PinproxyHTTP1

/// One direction's messages: in a head (its bytes held until the blank line)
/// or in a body (so many bytes still to pass).
struct RawHeads {
    enum Refusal: Error {
        case chunked
        case headTooLong
        case refused
    }

    private enum State {
        case head
        case body(remaining: Int)
    }

    private var state = State.head
    /// Bytes of a head whose end has not come yet.
    private var held = ByteBuffer()
    /// `--parsed-heads`: each head read by the parser before it is copied.
    private let parser: HeadParser?

    init(parsing kind: HeadParser.Kind? = nil) {
        parser = kind.map { HeadParser(kind: $0, maxFieldBytes: 65_536, maxFieldCount: 256) }
    }

    /// What goes on for `input`: each head without its `Connection` field,
    /// body bytes as they are.
    mutating func forward(_ input: ByteBuffer, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        var input = input
        var out = allocator.buffer(capacity: input.readableBytes)
        while input.readableBytes > 0 {
            switch state {
            case .body(let remaining):
                let count = min(remaining, input.readableBytes)
                var slice = input.readSlice(length: count)!
                out.writeBuffer(&slice)
                state = count == remaining ? .head : .body(remaining: remaining - count)
            case .head where held.readableBytes == 0:
                // The common read: the whole head is in it, cut out in place.
                guard let end = Self.headEnd(input) else {
                    held.writeBuffer(&input)
                    continue
                }
                try cutHead(input.readSlice(length: end)!, into: &out)
            case .head:
                held.writeBuffer(&input)
                guard let end = Self.headEnd(held) else {
                    if held.readableBytes > 65_536 { throw Refusal.headTooLong }
                    return out
                }
                try cutHead(held.readSlice(length: end)!, into: &out)
                input = held  // what came after the head
                held = ByteBuffer()
            }
        }
        return out
    }

    /// `bytes` through `heads` when there are any (`--raw-heads`), else as
    /// they are; nil when nothing is to go on yet, or when the messages are
    /// ones this cannot cut (the connection is closed then).
    static func forward(_ bytes: ByteBuffer, through heads: inout RawHeads?, context: ChannelHandlerContext) -> ByteBuffer? {
        guard heads != nil else { return bytes }
        do {
            let out = try heads!.forward(bytes, allocator: context.channel.allocator)
            return out.readableBytes > 0 ? out : nil
        } catch {
            context.close(promise: nil)
            return nil
        }
    }

    private mutating func cutHead(_ head: ByteBuffer, into out: inout ByteBuffer) throws {
        let length = try parser.map { try Self.copyParsedHead(head, parser: $0, into: &out) } ?? Self.copyHead(head, into: &out)
        state = length > 0 ? .body(remaining: length) : .head
    }

    /// The length of the head up to and with its blank line, if it is all here.
    private static func headEnd(_ buffer: ByteBuffer) -> Int? {
        buffer.withUnsafeReadableBytes { bytes in
            guard bytes.count >= 4 else { return nil }
            var index = 3
            while index < bytes.count {
                if bytes[index] == 10, bytes[index - 1] == 13, bytes[index - 2] == 10, bytes[index - 3] == 13 { return index + 1 }
                index += 1
            }
            return nil
        }
    }

    /// Copies the head's lines but `Connection`, and returns its `Content-Length` (0 if none).
    private static func copyHead(_ head: ByteBuffer, into out: inout ByteBuffer) throws -> Int {
        var length = 0
        try head.withUnsafeReadableBytes { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while bytes[end] != 10 { end += 1 }
                let line = UnsafeRawBufferPointer(rebasing: bytes[start...end])
                start = end + 1
                if startsWith(line, "connection:") { continue }
                if startsWith(line, "transfer-encoding:") { throw Refusal.chunked }
                if startsWith(line, "content-length:") { length = number(line) }
                out.writeBytes(line)
            }
        }
        return length
    }

    /// Reads the head with `parser` and writes it again from its spans: the
    /// start line as it came, each field but `Connection` as `name: value`.
    /// Returns the body's length.
    private static func copyParsedHead(_ head: ByteBuffer, parser: HeadParser, into out: inout ByteBuffer) throws -> Int {
        try head.withUnsafeReadableBytes { bytes in
            guard case .head(let parsed) = parser.parse(bytes) else { throw Refusal.refused }
            let framing = parser.kind == .request
                ? parsed.requestFraming(in: bytes) : parsed.responseFraming(in: bytes, requestHadNoBody: false)
            let length: Int
            switch framing {
            case .success(.none): length = 0
            case .success(.length(let count)): length = Int(count)
            case .success, .failure: throw Refusal.chunked
            }
            let firstField = parsed.fields.first?.name.start ?? parsed.length - 2
            out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[0..<firstField]))
            for field in parsed.fields where !isConnection(field.name, in: bytes) {
                out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[field.name.start..<field.name.end]))
                out.writeStaticString(": ")
                out.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[field.value.start..<field.value.end]))
                out.writeStaticString("\r\n")
            }
            out.writeStaticString("\r\n")
            return length
        }
    }

    private static func isConnection(_ name: ByteSpan, in bytes: UnsafeRawBufferPointer) -> Bool {
        name.count == 10 && startsWith(UnsafeRawBufferPointer(rebasing: bytes[name.start..<name.end]), "connection")
    }

    private static func startsWith(_ line: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        guard line.count >= name.utf8CodeUnitCount else { return false }
        for index in 0..<name.utf8CodeUnitCount where line[index] | 0x20 != name.utf8Start[index] | 0x20 { return false }
        return true
    }

    private static func number(_ line: UnsafeRawBufferPointer) -> Int {
        var value = 0
        for byte in line where byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") { value = value * 10 + Int(byte - UInt8(ascii: "0")) }
        return value
    }
}
