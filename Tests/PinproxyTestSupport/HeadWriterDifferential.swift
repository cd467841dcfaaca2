import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1NIO

/// The head path's writers against NIO's encoders and outbound validators
/// on the same parts: the bytes written, each write's outcome and the
/// errors the pipeline was told must be the same. What each writer is
/// compared with is what it replaces in pinproxy's pipelines: on an
/// upstream connection NIO's request encoder (automatic framing off) under
/// its request validator; on the app's leg `configureHTTPServerPipeline`'s
/// encoder and validator, told the request's method by its own decoder.
public enum HeadWriterDifferential {
    /// What writing some parts did.
    public struct Outcome: Equatable, CustomStringConvertible {
        public var bytes: [UInt8] = []
        /// Each write's result: nil succeeded, or the error's description.
        public var writes: [String?] = []
        /// The errors the pipeline was told, described.
        public var errors: [String] = []

        public var description: String {
            "bytes: \(String(decoding: bytes, as: UTF8.self).debugDescription), writes: \(writes), errors: \(errors)"
        }
    }

    /// Whether the request writer agrees with NIO: the same outcome, or, where
    /// NIO refused a head and still wrote the parts after it, the head
    /// refused the same way and nothing after it written (the one place the
    /// writer is stricter).
    public static func agree(_ ours: Outcome, _ nio: Outcome) -> Bool {
        if ours == nio { return true }
        guard let refused = nio.writes.first, refused != nil else { return false }
        return ours.writes.first == refused && ours.errors.first == nio.errors.first && ours.bytes.isEmpty
            && ours.writes.allSatisfy { $0 != nil }
    }

    /// `parts` written on an upstream connection by `RequestWriter` and by NIO.
    public static func requests(_ parts: [HTTPClientRequestPart]) throws -> (head: Outcome, nio: Outcome) {
        let ours = EmbeddedChannel()
        try ours.pipeline.syncOperations.addHandler(RequestWriter())
        let nio = EmbeddedChannel()
        var configuration = HTTPRequestEncoder.Configuration()
        configuration.automaticallySetFramingHeaders = false
        try nio.pipeline.syncOperations.addHandlers([HTTPRequestEncoder(configuration: configuration), NIOHTTPRequestHeadersValidator()])
        return (try write(parts, on: ours), try write(parts, on: nio))
    }

    /// `parts` written as the answer to `request` (the bytes the app sent)
    /// by `ResponseWriter` and by NIO's server pipeline.
    public static func responses(_ parts: [HTTPServerResponsePart], answering request: String) throws -> (head: Outcome, nio: Outcome) {
        let ours = EmbeddedChannel()
        let writer = ResponseWriter()
        try ours.pipeline.syncOperations.addHandlers([ByteToMessageHandler(HTTPRequestDecoder()), writer])
        let nio = EmbeddedChannel()
        try nio.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        for channel in [ours, nio] {
            try channel.writeInbound(ByteBuffer(string: request))
            while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
                // As pinproxy's exchange handler tells it, head by head.
                if channel === ours, case .head(let head) = part { writer.requestArrived(head.method) }
            }
        }
        return (try write(parts, on: ours), try write(parts, on: nio))
    }

    private static func write<Part>(_ parts: [Part], on channel: EmbeddedChannel) throws -> Outcome {
        var outcome = Outcome()
        for part in parts {
            let promise = channel.eventLoop.makePromise(of: Void.self)
            channel.write(part, promise: promise)
            channel.flush()
            do {
                try promise.futureResult.wait()
                outcome.writes.append(nil)
            } catch {
                outcome.writes.append(String(describing: error))
            }
            do {
                try channel.throwIfErrorCaught()
            } catch {
                outcome.errors.append(String(describing: error))
            }
        }
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { continue }
            outcome.bytes += buffer.readableBytesView
        }
        _ = try? channel.finish()
        return outcome
    }
}
