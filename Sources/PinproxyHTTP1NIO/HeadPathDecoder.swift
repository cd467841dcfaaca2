import NIOCore
import NIOHTTP1
import PinproxyHTTP1

/// NIO's HTTP/1 decoder's place in a pipeline, filled by the head path: the
/// bytes read by `MessageReader` (as strictly as NIO reads them, or more),
/// handed on as the same parts NIO's decoder hands on, so the handlers
/// above cannot tell them apart (`HTTP1Differential` compares the two on the
/// same bytes). What follows a CONNECT's or an upgrade's head is handed on
/// as bytes when the decoder is taken out, as NIO's `.forwardBytes` does.
///
/// A pipeline holds it in a concrete decoder of its own (`HeadPathDecoding`),
/// and its methods are inlinable, so that they run specialized for the
/// pipeline's `Head`.
public struct HeadPathDecoder<Head: HeadPathHead>: ByteToMessageDecoder {
    public typealias InboundOut = HTTPPart<Head, ByteBuffer>

    @usableFromInline var reader: MessageReader
    /// Responses: whether an informational answer (1xx but 101) is dropped,
    /// as NIO's `.drop` strategy does, rather than handed on.
    @usableFromInline let dropsInformational: Bool
    /// The parts one `decode` found, handed on once the bytes are let go.
    @usableFromInline var found: [Found] = []

    /// One part, its body as a place in the bytes given.
    @usableFromInline enum Found {
        case head(ParsedHead, start: Int, framing: BodyFraming)
        case body(start: Int, count: Int)
        case end(HTTPHeaders?)
    }

    /// `maxFieldBytes`, `maxFieldCount`: NIO's `maxHeaderListSize` and
    /// `maxHeaderFieldCount` (pinproxy sets `maxHeaderFieldSize` to the first).
    @inlinable public init(maxFieldBytes: Int, maxFieldCount: Int, dropsInformational: Bool = true) {
        reader = MessageReader(parser: HeadParser(kind: Head.kind, maxFieldBytes: maxFieldBytes, maxFieldCount: maxFieldCount))
        self.dropsInformational = dropsInformational
        found.reserveCapacity(4)
    }

    @inlinable public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        // Moved out while the reader runs, so the two are not both `self`'s
        // at once (and the array keeps its storage from read to read).
        var found = self.found
        self.found = []
        let dropsInformational = self.dropsInformational
        // A refusal ends the stream after the parts found before it, as NIO
        // hands on what it parsed before an error.
        var refusal: MessageRefusal?
        let consumed = buffer.withUnsafeReadableBytes { bytes in
            do {
                return try reader.read(bytes) { event in
                    switch event {
                    case .head(let head, _, _) where dropsInformational && (100..<200).contains(head.status) && head.status != 101:
                        break
                    case .head(let head, let at, let framing):
                        found.append(.head(head, start: at, framing: framing))
                    case .body(let span):
                        found.append(.body(start: span.start, count: span.count))
                    case .end(let trailers):
                        found.append(.end(trailers.isEmpty ? nil : HTTPHeaders(trailers.map {
                            (String(decoding: $0.name, as: UTF8.self), String(decoding: $0.value, as: UTF8.self))
                        })))
                    }
                }
            } catch let error as MessageRefusal {
                refusal = error
                return 0
            } catch {
                preconditionFailure("MessageReader throws only MessageRefusal, not \(error)")
            }
        }
        // Heads and bodies are slices of the bytes read (NIO lets a slice be
        // taken only of readable bytes, so of the buffer as it was).
        let read = buffer
        buffer.moveReaderIndex(forwardBy: consumed)
        for part in found {
            switch part {
            case .head(let head, let start, let framing):
                let bytes = read.getSlice(at: read.readerIndex + start, length: head.length)!
                context.fireChannelRead(wrapInboundOut(.head(Head(head, framing: framing, bytes: bytes))))
            case .body(let offset, let count):
                context.fireChannelRead(wrapInboundOut(.body(read.getSlice(at: read.readerIndex + offset, length: count)!)))
            case .end(let trailers): context.fireChannelRead(wrapInboundOut(.end(trailers)))
            }
        }
        found.removeAll(keepingCapacity: true)
        self.found = found
        if let refusal { throw refusal }
        return .needMoreData
    }

    @inlinable public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        if !reader.hasSwitchedProtocol {
            _ = try decode(context: context, buffer: &buffer)
            if seenEOF {
                try reader.connectionClosed(unconsumedBytes: buffer.readableBytes) { event in
                    if case .end = event { context.fireChannelRead(NIOAny(InboundOut.end(nil))) }
                }
            }
        }
        // Taken out after a CONNECT or an upgrade: the bytes after the head
        // belong to whatever replaces this decoder.
        if buffer.readableBytes > 0 && !seenEOF {
            context.fireChannelRead(NIOAny(buffer))
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        return .needMoreData
    }
}

/// The response decoder sees each request go out, so that it reads the
/// answer to a HEAD or a CONNECT without a body, as NIO's does.
extension HeadPathDecoder: WriteObservingByteToMessageDecoder where Head: ResponseHeadPathHead {
    public typealias OutboundIn = HTTPClientRequestPart

    @inlinable public mutating func write(data: HTTPClientRequestPart) {
        if case .head(let head) = data {
            reader.requestSent(expectingNoBody: head.method == .HEAD || head.method == .CONNECT)
        }
    }
}

/// A pipeline's concrete head path decoder: a type that holds a
/// `HeadPathDecoder` and gets `decode`, `decodeLast` (and, for responses,
/// `write`) from here, so that NIO's `ByteToMessageHandler`, which calls its
/// decoder through the conformance's witness, runs them specialized for the
/// type's `Head`. A generic `HeadPathDecoder<Head>` handed to NIO directly
/// ran unspecialized, looking each part's type up and casting each `NIOAny`
/// at run time (issue 33).
public protocol HeadPathDecoding: ByteToMessageDecoder where InboundOut == HTTPPart<Head, ByteBuffer> {
    associatedtype Head: HeadPathHead
    var decoder: HeadPathDecoder<Head> { get set }
}

extension HeadPathDecoding {
    @inlinable public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        try decoder.decode(context: context, buffer: &buffer)
    }

    @inlinable public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
