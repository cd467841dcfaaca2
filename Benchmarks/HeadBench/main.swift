// pinproxy-headbench (bench/heads.sh): what reading one HTTP/1 head costs,
// NIO's decoder against pinproxy's HeadParser, on the same bytes: the
// request bench/run's client sends and the response nginx answers it with.
// NIO's decoder runs as it runs in a pipeline, in an EmbeddedChannel; the
// same channel with no decoder is measured too and taken off, so its figure
// is the decoder's own. A figure per head, best of five runs.
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PinproxyHTTP1

let iterations = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 200_000

let request = Array("GET /small HTTP/1.1\r\nHost: upstream.bench.test:8443\r\nUser-Agent: pinproxy-bench/1\r\nAccept: */*\r\n\r\n".utf8)
let response = Array("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 27 Nov 2026 16:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nhello, world\n".utf8)

/// Nanoseconds per call of `body`, the best of five runs of `count` calls.
func measure(_ count: Int, _ body: () -> Void) -> Double {
    var best = Double.infinity
    for _ in 0..<5 {
        let start = ContinuousClock.now
        for _ in 0..<count { body() }
        let elapsed = ContinuousClock.now - start
        let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        best = min(best, nanoseconds / Double(count))
    }
    return best
}

/// NIO's decoder in a channel: the bytes in, every part out.
func nioChannel(_ kind: HeadParser.Kind, decoder: Bool) throws -> EmbeddedChannel {
    let channel = EmbeddedChannel()
    guard decoder else { return channel }
    switch kind {
    case .request:
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
    case .response:
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPResponseDecoder()))
    }
    return channel
}

func nio(_ kind: HeadParser.Kind, _ bytes: [UInt8], decoder: Bool) throws -> Double {
    let channel = try nioChannel(kind, decoder: decoder)
    let buffer = ByteBuffer(bytes: bytes)
    return measure(iterations) {
        if kind == .response {
            // The decoder pairs each response with a request it saw go out
            // (the channel alone passes the same write, so it is taken off too).
            try! channel.writeOutbound(HTTPClientRequestPart.head(.init(version: .http1_1, method: .GET, uri: "/small")))
            _ = try! channel.readOutbound(as: HTTPClientRequestPart.self)
        }
        try! channel.writeInbound(buffer)
        switch (decoder, kind) {
        case (false, _): while try! channel.readInbound(as: ByteBuffer.self) != nil {}
        case (true, .request): while try! channel.readInbound(as: HTTPServerRequestPart.self) != nil {}
        case (true, .response): while try! channel.readInbound(as: HTTPClientResponsePart.self) != nil {}
        }
    }
}

func ours(_ kind: HeadParser.Kind, _ bytes: [UInt8], nioHead: Bool) -> Double {
    let parser = HeadParser(kind: kind, maxFieldBytes: 65_536, maxFieldCount: 256)
    return bytes.withUnsafeBytes { raw in
        measure(iterations) {
            guard case .head(let head) = parser.parse(raw) else { fatalError("the bench's head was refused") }
            let framing = kind == .request ? head.requestFraming(in: raw) : head.responseFraming(in: raw, requestHadNoBody: false)
            guard case .success = framing else { fatalError("the bench's framing was refused") }
            if nioHead {
                // What an exchange still on NIO's types would pay on top: the strings.
                func text(_ span: ByteSpan) -> String {
                    String(decoding: UnsafeRawBufferPointer(rebasing: raw[span.start..<span.end]), as: UTF8.self)
                }
                let headers = HTTPHeaders(head.fields.map { (text($0.name), text($0.value)) })
                precondition(!headers.isEmpty)
            }
        }
    }
}

for (name, kind, bytes) in [("request", HeadParser.Kind.request, request), ("response", .response, response)] {
    let channel = try nio(kind, bytes, decoder: false)
    let decoder = try nio(kind, bytes, decoder: true)
    let parsed = ours(kind, bytes, nioHead: false)
    let withStrings = ours(kind, bytes, nioHead: true)
    func ns(_ value: Double) -> String { String(Int(value.rounded())) }
    print("\(name): NIO's decoder \(ns(decoder - channel)) ns/head (its channel alone \(ns(channel)));",
          "HeadParser and framing \(ns(parsed)) ns/head; with HTTPHeaders made from its spans \(ns(withStrings)) ns")
}
