import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1NIO

/// An upstream's answer forwarded as its own bytes against the way it went
/// before: read by NIO's decoder into a head, edited as a whole, written by
/// NIO's server encoder. The edits are the proxy's, passed in: `remake` edits
/// NIO's head, `forward` writes the head path's bytes through the writer.
public enum ForwardedHeadDifferential {
    public struct Outcome {
        /// What the app got through the head path, and through NIO.
        public var forwarded: String
        public var remade: String
        /// Whether the upstream's connection persists, as each path reads it.
        public var keepAlive: (bytes: Bool, nio: Bool)
    }

    /// Nil when a decoder refused the answer; `nioRefusedAlone` is set when
    /// NIO's did and the head path read it (the head path must refuse all NIO refuses).
    public static func run(_ response: [UInt8], answering method: HTTPMethod, closing: Bool,
                           remake: (HTTPResponseHead, Bool) -> HTTPResponseHead,
                           persists: (ResponseHeadBytes) -> Bool,
                           forward: (ResponseWriter, ResponseHeadBytes, Bool) -> Void,
                           nioRefusedAlone: inout Bool) throws -> Outcome? {
        let nioParts = try? parts(of: response, answering: method, decoder: ByteToMessageHandler(HTTPResponseDecoder()),
                                  as: HTTPClientResponsePart.self)
        let ourParts = try? parts(of: response, answering: method,
                                  decoder: ByteToMessageHandler(HeadPathDecoder<ResponseHeadBytes>(maxFieldBytes: 80 * 1024, maxFieldCount: 65_534)),
                                  as: HTTPPart<ResponseHeadBytes, ByteBuffer>.self)
        // A `101` is never forwarded as bytes: the exchange makes its head
        // whole, and what follows it is a splice's, not a message.
        if case .head(let head)? = ourParts?.first, head.statusCode == 101 { return nil }
        guard let nioParts else {
            nioRefusedAlone = ourParts != nil
            return nil
        }
        guard let ourParts else { return nil }  // stricter than NIO: HeadDifferentialTests pins where
        // NIO's server pipeline, as the app's leg was before.
        let nio = EmbeddedChannel()
        defer { _ = try? nio.finish(acceptAlreadyClosed: true) }
        try nio.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try nio.writeInbound(ByteBuffer(string: "\(method.rawValue) / HTTP/1.1\r\nHost: x\r\n\r\n"))
        var nioKeepAlive = false
        for part in nioParts {
            switch part {
            case .head(let head):
                nioKeepAlive = head.isKeepAlive
                try nio.writeOutbound(HTTPServerResponsePart.head(remake(head, closing)))
            case .body(let body): try nio.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(body)))
            case .end(let trailers): try nio.writeOutbound(HTTPServerResponsePart.end(trailers))
            }
        }
        // The head path's writer, the head forwarded as bytes.
        let writer = ResponseWriter()
        let ours = EmbeddedChannel()
        defer { _ = try? ours.finish(acceptAlreadyClosed: true) }
        try ours.pipeline.syncOperations.addHandlers([ByteToMessageHandler(HTTPRequestDecoder()), writer])
        writer.requestArrived(method)
        var bytesKeepAlive = false
        for part in ourParts {
            switch part {
            case .head(let head):
                bytesKeepAlive = persists(head)
                forward(writer, head, closing)
            case .body(let body): try ours.writeOutbound(HTTPServerResponsePart.body(.byteBuffer(body)))
            case .end(let trailers): try ours.writeOutbound(HTTPServerResponsePart.end(trailers))
            }
        }
        ours.flush()
        return Outcome(forwarded: trimmingLineEnds(try written(ours)), remade: trimmingLineEnds(try written(nio)),
                       keepAlive: (bytesKeepAlive, nioKeepAlive))
    }

    /// The parts an upstream connection's decoder hands on for `response`,
    /// the answer to a request with `method`; the connection closes after
    /// it, so that an answer read to the close ends too. Throws when the
    /// decoder refuses the bytes, at once or at the close (the head path
    /// waits for a head's blank line before it reads the head, where NIO's
    /// decoder refuses a bad byte as it comes).
    static func parts<Part>(of response: [UInt8], answering method: HTTPMethod, decoder: some ChannelHandler, as: Part.Type) throws -> [Part] {
        let channel = EmbeddedChannel()
        // A channel left open keeps its pipeline, and so itself, alive.
        var finished = false
        defer { if !finished { _ = try? channel.finish(acceptAlreadyClosed: true) } }
        try channel.pipeline.syncOperations.addHandlers([HTTPRequestEncoder(), decoder])
        try channel.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method, uri: "/")))
        try channel.writeOutbound(HTTPClientRequestPart.end(nil))
        try channel.writeInbound(ByteBuffer(bytes: response))
        var parts: [Part] = []
        while let part = try channel.readInbound(as: Part.self) { parts.append(part) }
        finished = true
        _ = try channel.finish(acceptAlreadyClosed: true)
        while let part = try channel.readInbound(as: Part.self) { parts.append(part) }
        return parts
    }

    /// Each line without the spaces and tabs before its CRLF. NIO's decoder
    /// keeps a value's trailing whitespace (llhttp drops only the leading);
    /// the head path drops it, as RFC 9110 §5.5 says, so a field or trailer
    /// forwarded as bytes has none. The value means the same to both.
    static func trimmingLineEnds(_ text: String) -> String {
        text.components(separatedBy: "\r\n")
            .map { String($0.reversed().drop { $0 == " " || $0 == "\t" }.reversed()) }
            .joined(separator: "\r\n")
    }

    static func written(_ channel: EmbeddedChannel) throws -> String {
        var out = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { continue }
            out += String(buffer: buffer)
        }
        return out
    }
}
