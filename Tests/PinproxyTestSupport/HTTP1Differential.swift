import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO

/// The same bytes read by NIO's HTTP/1 decoder and by pinproxy's head path
/// (`HeadParser` and `BodyFraming`), message by message. The head path may
/// refuse more than NIO; it may never read a message NIO does not read, nor
/// read one differently: another method, target, version, status, field, or
/// body length would be a message two parsers see two ways (the shape of
/// request smuggling). Used by PinproxyHTTP1Tests and the `head` fuzz target.
public enum HTTP1Differential {
    /// Small limits, so that inputs reach them.
    public static let maxFieldBytes = 2048
    public static let maxFieldCount = 32

    /// A message as one reader saw it.
    public struct Message: Equatable, CustomStringConvertible, Sendable {
        public var method = ""
        public var target = ""
        public var status = 0
        public var minorVersion = 0
        public var fields: [[String]] = []
        /// The body's length, once the message's end was read; nil before
        /// that, or where the reader does not follow the body.
        public var bodyBytes: Int?
        /// The body's bytes as read so far.
        public var body: [UInt8] = []
        /// A chunked body's trailer fields, once its end was read.
        public var trailers: [[String]] = []

        /// Values compare without trailing whitespace: NIO keeps it (llhttp
        /// drops only the leading), the head path drops it as RFC 9110 §5.5
        /// says; the value means the same to both.
        func sameHead(as other: Message) -> Bool {
            method == other.method && target == other.target && status == other.status
                && minorVersion == other.minorVersion && HTTP1Differential.trimmed(fields) == HTTP1Differential.trimmed(other.fields)
        }

        public var description: String {
            let start = status == 0 ? "\(method) \(target) HTTP/1.\(minorVersion)" : "HTTP/1.\(minorVersion) \(status)"
            return "\(start) \(fields) body \(bodyBytes.map(String.init) ?? "-")"
        }
    }

    /// What a reader made of the input: the messages whose head it read, and
    /// why it stopped.
    public struct Reading: Sendable {
        public var messages: [Message] = []
        public var stop = "end of input"

        mutating func take(_ event: MessageReader.Event, in bytes: UnsafeRawBufferPointer, kind: HeadParser.Kind) {
            switch event {
            case .head(let head, let at, _):
                messages.append(Message(bytes: UnsafeRawBufferPointer(rebasing: bytes[at...]), head: head, kind: kind))
            case .body(let span):
                messages[messages.count - 1].body += bytes[span.start..<span.end]
            case .end(let trailers):
                messages[messages.count - 1].bodyBytes = messages[messages.count - 1].body.count
                messages[messages.count - 1].trailers = trailers.map {
                    [String(decoding: $0.name, as: UTF8.self), String(decoding: $0.value, as: UTF8.self)]
                }
            }
        }
    }

    /// nil when the head path's reading of `input` agrees with NIO's; else
    /// what differs.
    public static func divergence(_ input: [UInt8], kind: HeadParser.Kind) -> String? {
        let ours = headPath(input, kind: kind)
        // The same bytes in small reads must read the same: the reader keeps
        // its place in a head, a body and a chunk across reads.
        let readSize = 1 + input.count % 7
        let inPieces = headPath(input, kind: kind, readSize: readSize)
        guard inPieces.messages == ours.messages, inPieces.stop.hasPrefix("refused") == ours.stop.hasPrefix("refused") else {
            return "read in \(readSize)-byte reads, the head path read \(inPieces.messages) (\(inPieces.stop)); whole, \(ours.messages) (\(ours.stop))"
        }
        // In NIO's decoder's place, in a channel, the head path hands on the same.
        let decoded = headPathDecoder(input, kind: kind, readSize: readSize)
        guard decoded.messages == ours.messages, decoded.stop.hasPrefix("refused") == ours.stop.hasPrefix("refused") else {
            return "HeadPathDecoder handed on \(decoded.messages) (\(decoded.stop)); MessageReader read \(ours.messages) (\(ours.stop))"
        }
        let theirs = nio(input, kind: kind)
        for (index, message) in ours.messages.enumerated() {
            guard index < theirs.messages.count else {
                return "the head path read message \(index + 1) (\(message)); NIO did not (\(theirs.stop))"
            }
            let other = theirs.messages[index]
            guard message.sameHead(as: other) else {
                return "message \(index + 1): the head path read \(message), NIO \(other)"
            }
            if let body = message.bodyBytes, other.bodyBytes != body {
                return "message \(index + 1): the head path read a \(body)-byte body, NIO \(other.bodyBytes.map(String.init) ?? "no end") (\(theirs.stop))"
            }
            if message.bodyBytes != nil, message.body != other.body {
                return "message \(index + 1): the two read different body bytes"
            }
            if message.bodyBytes != nil, Self.trimmed(message.trailers) != Self.trimmed(other.trailers) {
                return "message \(index + 1): the head path read trailers \(message.trailers), NIO \(other.trailers)"
            }
        }
        return nil
    }

    static func trimmed(_ fields: [[String]]) -> [[String]] {
        fields.map { [$0[0], String($0[1].reversed().drop { $0 == " " || $0 == "\t" }.reversed())] }
    }

    // MARK: The head path

    /// The head path's reading (`MessageReader`), the input given in reads
    /// of `readSize` bytes, the bytes not consumed given again with the next.
    public static func headPath(_ input: [UInt8], kind: HeadParser.Kind, readSize: Int = .max) -> Reading {
        var reader = MessageReader(parser: HeadParser(kind: kind, maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount))
        if kind == .response {
            for _ in 0..<64 { reader.requestSent(expectingNoBody: false) }
        }
        var reading = Reading()
        var pending: [UInt8] = []
        var start = 0
        while start < input.count {
            let end = start + min(readSize, input.count - start)
            pending += input[start..<end]
            start = end
            do {
                let consumed = try pending.withUnsafeBytes { bytes throws(MessageRefusal) -> Int in
                    try reader.read(bytes) { event in reading.take(event, in: bytes, kind: kind) }
                }
                pending.removeFirst(consumed)
            } catch {
                reading.stop = "refused: \(error)"
                return reading
            }
            if reader.hasSwitchedProtocol {
                reading.stop = "left HTTP/1"
                return reading
            }
        }
        return reading
    }

    // MARK: NIO

    public static func nio(_ input: [UInt8], kind: HeadParser.Kind) -> Reading {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = maxFieldBytes
        limits.maxHeaderFieldSize = maxFieldBytes
        limits.maxHeaderFieldCount = maxFieldCount
        switch kind {
        case .request:
            return read(input, through: ByteToMessageHandler(
                HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .drop, limitConfiguration: limits)), kind: kind)
        case .response:
            return read(input, through: ByteToMessageHandler(
                HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .forward, limitConfiguration: limits)), kind: kind)
        }
    }

    // MARK: The head path's decoder

    /// `HeadPathDecoder` in a channel, as NIO's decoder is, the input in
    /// reads of `readSize` bytes.
    public static func headPathDecoder(_ input: [UInt8], kind: HeadParser.Kind, readSize: Int = .max) -> Reading {
        switch kind {
        case .request:
            return read(input, through: ByteToMessageHandler(
                HeadPathDecoder<HTTPRequestHead>(maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount)), kind: kind, readSize: readSize)
        case .response:
            return read(input, through: ByteToMessageHandler(
                HeadPathDecoder<HTTPResponseHead>(maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount, dropsInformational: false)),
                kind: kind, readSize: readSize)
        }
    }

    /// The parts `decoder` hands on for `input`, as messages.
    /// The parts waiting in `channel`, as messages.
    static func collect<Head: Equatable>(_ channel: EmbeddedChannel, into reading: inout Reading, message: (Head) -> Message) {
        while let part = try? channel.readInbound(as: HTTPPart<Head, ByteBuffer>.self) {
            switch part {
            case .head(let head):
                reading.messages.append(message(head))
            case .body(let body):
                reading.messages[reading.messages.count - 1].body += body.readableBytesView
            case .end(let trailers):
                reading.messages[reading.messages.count - 1].bodyBytes = reading.messages[reading.messages.count - 1].body.count
                reading.messages[reading.messages.count - 1].trailers = trailers.map { $0.map { [$0.name, $0.value] } } ?? []
            }
        }
    }

    static func read(_ input: [UInt8], through decoder: some ChannelHandler, kind: HeadParser.Kind, readSize: Int = .max) -> Reading {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        var reading = Reading()
        do {
            try channel.pipeline.syncOperations.addHandler(decoder)
            if kind == .response {
                // A response decoder pairs each response with a request it saw go out.
                for _ in 0..<64 {
                    try channel.writeOutbound(HTTPClientRequestPart.head(.init(version: .http1_1, method: .GET, uri: "/")))
                }
            }
        } catch {
            reading.stop = "could not set up: \(error)"
            return reading
        }
        var start = 0
        while start < input.count {
            let end = start + min(readSize, input.count - start)
            do {
                try channel.writeInbound(ByteBuffer(bytes: input[start..<end]))
            } catch {
                reading.stop = "refused: \(error)"
                break
            }
            start = end
        }
        switch kind {
        case .request:
            collect(channel, into: &reading) { (head: HTTPRequestHead) in
                Message(method: head.method.rawValue, target: head.uri, minorVersion: head.version.minor,
                        fields: head.headers.map { [$0.name, $0.value] })
            }
        case .response:
            collect(channel, into: &reading) { (head: HTTPResponseHead) in
                Message(status: Int(head.status.code), minorVersion: head.version.minor, fields: head.headers.map { [$0.name, $0.value] })
            }
        }
        return reading
    }
}

extension HTTP1Differential.Message {
    init(bytes: UnsafeRawBufferPointer, head: ParsedHead, kind: HeadParser.Kind) {
        func text(_ span: ByteSpan) -> String {
            String(decoding: UnsafeRawBufferPointer(rebasing: bytes[span.start..<span.end]), as: UTF8.self)
        }
        self.init()
        minorVersion = head.minorVersion
        switch kind {
        case .request:
            method = text(head.method)
            target = text(head.target)
        case .response:
            status = head.status
        }
        fields = head.fields.map { [text($0.name), text($0.value)] }
    }
}
