import NIOCore
import NIOHTTP1
import PinproxyTestSupport

/// Target `write`: the head path's writers (`RequestWriter`,
/// `ResponseWriter`) against NIO's encoders and outbound validators on the
/// same parts (`HeadWriterDifferential`): the same bytes, the same outcome
/// for each write, the same errors (the request writer may refuse what
/// follows a refused head). The first byte picks the kind (bit 0), the
/// method (bits 1–3) and the version (bits 4–5); the rest, cut at 0x00 0xFF,
/// is the target (for a response: two bytes of status, then the reason
/// phrase), then fields as name and value, and a last odd one a trailer.
enum WriteTarget {
    static let methods: [HTTPMethod] = [.GET, .HEAD, .POST, .CONNECT, .PUT, .OPTIONS, .RAW(value: "PURGE-ALL"), .RAW(value: "bad method")]
    static let versions: [HTTPVersion] = [.http1_1, .http1_0, HTTPVersion(major: 2, minor: 0), HTTPVersion(major: 1, minor: 2)]

    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let segments = FuzzInput.segments(input.dropFirst()).map { String(decoding: $0, as: UTF8.self) }
        let method = methods[Int(mode >> 1) & 7]
        let version = versions[Int(mode >> 4) & 3]
        var fields: [(String, String)] = []
        var index = 1
        while index + 1 < segments.count {
            fields.append((segments[index], segments[index + 1]))
            index += 2
        }
        let trailers = index < segments.count ? HTTPHeaders([(segments[index], "t")]) : nil
        let body = ByteBuffer(string: "abc")
        do {
            if mode & 1 == 0 {
                let head = HTTPRequestHead(version: version, method: method, uri: segments[0], headers: HTTPHeaders(fields))
                let (ours, nio) = try HeadWriterDifferential.requests([.head(head), .body(.byteBuffer(body)), .end(trailers)])
                precondition(HeadWriterDifferential.agree(ours, nio), "RequestWriter and NIO differ: \(ours) against \(nio)")
            } else {
                let first = Array(segments[0].utf8)
                let code = first.count >= 2 ? Int(first[0]) << 8 | Int(first[1]) : 200
                let reason = String(decoding: first.dropFirst(2), as: UTF8.self)
                let status = reason.isEmpty ? HTTPResponseStatus(statusCode: code % 600) : .custom(code: UInt(code % 600), reasonPhrase: reason)
                let ask = method == .CONNECT ? "CONNECT a.test:443 HTTP/1.1\r\n\r\n" : "\(method == .HEAD ? "HEAD" : "GET") / HTTP/1.1\r\n\r\n"
                let bodyParts: [HTTPServerResponsePart] = method == .HEAD || method == .CONNECT ? [] : [.body(.byteBuffer(body))]
                let head = HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields))
                let (ours, nio) = try HeadWriterDifferential.responses([.head(head)] + bodyParts + [.end(trailers)], answering: ask)
                precondition(ours == nio, "ResponseWriter and NIO differ: \(ours) against \(nio)")
            }
        } catch {
            preconditionFailure("an embedded channel failed: \(error)")
        }
    }
}
