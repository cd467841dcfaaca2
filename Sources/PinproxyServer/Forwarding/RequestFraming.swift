import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO

/// How a forwarded request's body is delimited on the upstream connection.
///
/// pinproxy decides this itself, from the client's head, and writes exactly
/// one framing header upstream. It never lets an HTTP encoder infer framing
/// from the method: NIO's encoder treats GET, DELETE and TRACE as bodiless,
/// and with a body but no framing header it writes the body bytes raw, where
/// the upstream parses them as the next request (request smuggling, with the
/// smuggled response handed to whoever borrows the pooled connection next).
/// The upstream encoder runs with automatic framing off; this is the only
/// place framing headers are written.
enum RequestFraming: Equatable, Sendable {
    /// No body: no framing header goes up.
    case none
    /// `Content-Length: n`.
    case length(UInt64)
    /// `Transfer-Encoding: chunked`.
    case chunked

    /// More `Connection` tokens than any real client sends: refused, so that
    /// a crafted head cannot make hop-by-hop handling expensive.
    static let maxConnectionTokens = 32

    /// Headers that decide framing: a `Connection` header may not name them
    /// (a hop-by-hop strip would otherwise remove the only length).
    private static let framingHeaders: Set<String> = ["content-length", "transfer-encoding"]

    /// The framing of a client's request, or why it is ambiguous (400).
    /// Header names and `chunked` compare without case, as the decoder that
    /// read the body did.
    static func of(_ head: HTTPRequestHead) -> Result<RequestFraming, FramingProblem> {
        of(version: head.version) { read in
            for (name, value) in head.headers { read(name, value) }
        }
    }

    /// The same for an HTTP/2 stream's head kept as its block: the whole
    /// head's fields (`AppRequestBlock.forEachField`), without the head.
    static func of(_ head: AppRequestBlock) -> Result<RequestFraming, FramingProblem> {
        of(version: .http2) { read in
            head.forEachField { name, value, _ in read(name, value) }
        }
    }

    /// The fields `fields` hands to its argument, read one by one until one is refused.
    private static func of(version: HTTPVersion, _ fields: ((String, String) -> Void) -> Void) -> Result<RequestFraming, FramingProblem> {
        var framing = FramingFields()
        var problem: FramingProblem?
        fields { name, value in
            guard problem == nil else { return }
            let kind: FramingFields.Kind
            if name.utf8.count == 14, name.lowercased() == "content-length" {
                kind = .contentLength
            } else if name.utf8.count == 17, name.lowercased() == "transfer-encoding" {
                kind = .transferEncoding
            } else if name.utf8.count == 10, name.lowercased() == "connection" {
                kind = .connection
            } else {
                return
            }
            problem = framing.read(kind, Substring(value))
        }
        if let problem { return .failure(problem) }
        return framing.framing(version: version)
    }

    /// The same, read from a head kept as its bytes: the same fields, found
    /// by their names' bytes, their values made strings (these few only).
    static func of(_ head: RequestHeadBytes) -> Result<RequestFraming, FramingProblem> {
        head.bytes.withUnsafeReadableBytes { bytes in
            var fields = FramingFields()
            for field in head.parsed.fields {
                let name = field.name.bytes(in: bytes)
                let kind: FramingFields.Kind
                if FieldNames.equal(name, "content-length") {
                    kind = .contentLength
                } else if FieldNames.equal(name, "transfer-encoding") {
                    kind = .transferEncoding
                } else if FieldNames.equal(name, "connection") {
                    kind = .connection
                } else {
                    continue
                }
                if let problem = fields.read(kind, Substring(field.value.text(in: bytes))) { return .failure(problem) }
            }
            return fields.framing(version: head.version)
        }
    }

    /// The fields that decide a request's framing, read one by one, then decided.
    private struct FramingFields {
        enum Kind { case contentLength, transferEncoding, connection }

        var lengths: [Substring] = []
        var encodings: [Substring] = []
        var connectionTokens = 0

        mutating func read(_ kind: Kind, _ value: Substring) -> FramingProblem? {
            switch kind {
            case .contentLength:
                lengths.append(contentsOf: value.split(separator: ",", omittingEmptySubsequences: false).map(\.trimmingSpaces))
            case .transferEncoding:
                encodings.append(contentsOf: value.split(separator: ",", omittingEmptySubsequences: false).map(\.trimmingSpaces))
            case .connection:
                for token in value.split(separator: ",") {
                    connectionTokens += 1
                    if connectionTokens > maxConnectionTokens {
                        return .init("more than \(maxConnectionTokens) Connection tokens")
                    }
                    let lower = token.trimmingSpaces.lowercased()
                    if framingHeaders.contains(lower) {
                        return .init("Connection names \(lower), a header that frames the message")
                    }
                }
            }
            return nil
        }

        func framing(version: HTTPVersion) -> Result<RequestFraming, FramingProblem> {
            if !lengths.isEmpty && !encodings.isEmpty {
                return .failure(.init("both Content-Length and Transfer-Encoding are present"))
            }
            if lengths.count > 1 {
                return .failure(.init("more than one Content-Length"))
            }
            if let length = lengths.first {
                // Digits only: `+5`, `0x5` or ` 5 5` would be read differently by someone.
                guard !length.isEmpty, length.utf8.count <= 19, length.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = UInt64(length) else {
                    return .failure(.init("Content-Length \"\(length)\" is not a number"))
                }
                return .success(.length(value))
            }
            if !encodings.isEmpty {
                guard encodings.count == 1, encodings[0].lowercased() == "chunked" else {
                    return .failure(.init("Transfer-Encoding must be exactly \"chunked\", not \"\(encodings.joined(separator: ", "))\""))
                }
                // HTTP/2's codec writes `chunked` for a body delimited by END_STREAM.
                guard version.major >= 2 || (version.major == 1 && version.minor >= 1) else {
                    return .failure(.init("Transfer-Encoding in an HTTP/1.0 request"))
                }
                return .success(.chunked)
            }
            return .success(.none)
        }
    }

    /// Why `receiving` more body bytes after `received` would exceed what
    /// this framing delimits, or nil while they fit. A body that outgrows
    /// its framing can only be smuggled bytes: they are never forwarded.
    func excess(after received: Int, receiving: Int) -> String? {
        switch self {
        case .chunked:
            return nil
        case .none:
            return receiving == 0 ? nil : "the request carries a body its head does not frame (no Content-Length, no Transfer-Encoding)"
        case .length(let length):
            return UInt64(received + receiving) <= length ? nil : "the request body is longer than its Content-Length (\(length) bytes)"
        }
    }

    /// Removes every framing header, then writes this framing's one header.
    func apply<Fields: UpstreamFieldEditing>(to headers: inout Fields) {
        headers.remove(name: "content-length")
        headers.remove(name: "transfer-encoding")
        switch self {
        case .none: break
        case .length(let length): headers.add(name: "Content-Length", value: String(length))
        case .chunked: headers.add(name: "Transfer-Encoding", value: "chunked")
        }
    }
}

/// Why a request's framing was refused.
struct FramingProblem: Error, Equatable, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}
