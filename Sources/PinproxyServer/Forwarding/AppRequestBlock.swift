import NIOHPACK
import NIOHTTP1

/// An app's request on an HTTP/2 stream as the header block it came in,
/// its pseudo-headers read and checked (the refusals a head made whole from
/// it had). The exchange routes it and an HTTP/2
/// upstream is sent it edited (`ForwardedRequestBlock`), without the head
/// made whole and turned back into a block (issue 33, as
/// `HTTP2ResponseBlock` is for responses). `whole` is that head, field for
/// field, for what reads a head whole: the routing of any request but the
/// common one, an HTTP/1.1 upstream, the tests that compare the two ways.
struct AppRequestBlock: Equatable {
    /// The block as it arrived: pseudo-headers and fields, in order.
    let block: HPACKHeaders
    let method: HTTPMethod
    /// `:path`.
    let path: String
    /// `:authority` when the block has no `host` of its own: the whole
    /// head's `Host`, its first field.
    let authorityAsHost: String?
    /// The framing field the whole head has that the block has not: the one
    /// NIO's codec added after `Host` for a method that expects a body and
    /// declares no length, and `transfer-encoding: chunked` at the end once
    /// `HTTP2StreamAdapter` saw a body follow a head that framed none.
    private(set) var addedFraming: AddedFraming
    private(set) var chunkedAtEnd = false

    enum AddedFraming {
        case none
        /// `content-length: 0`: the block ended the stream.
        case emptyLength
        /// `transfer-encoding: chunked`: DATA may follow.
        case chunked
    }

    /// The block of a request, checked; `endStream`: whether it ended the
    /// stream. Throws `HTTP2HeaderBlocks.Malformed` (the stream is reset).
    init(_ block: HPACKHeaders, endStream: Bool) throws {
        var method: String?
        var path: String?
        var scheme: String?
        var authority: String?
        var hosts = 0
        var hasLength = false
        for (name, value, _) in block {
            guard name.utf8.first == UInt8(ascii: ":") else {
                if name == "host" { hosts += 1 } else if name == "content-length" { hasLength = true }
                continue
            }
            switch name {
            case ":method": method = try Self.pseudo(name, value, seen: method)
            case ":path": path = try Self.pseudo(name, value, seen: path)
            case ":scheme": scheme = try Self.pseudo(name, value, seen: scheme)
            case ":authority": authority = try Self.pseudo(name, value, seen: authority)
            default: break  // :protocol (extended CONNECT): NIO's validation decides
            }
        }
        guard let method else { throw HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":method") }
        guard let path else { throw HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":path") }
        guard scheme != nil else { throw HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":scheme") }
        // RFC 9113 §8.3.1: a client converting from HTTP/1.1 may send `host`
        // alone; that one `host` is then the authority checked (421). With
        // both, `host` is kept and checked, as NIO's codec kept it.
        guard authority != nil || hosts == 1 else { throw HTTP2HeaderBlocks.Malformed.noAuthority }
        self.block = block
        self.method = HTTPMethod(rawValue: method)
        self.path = path
        authorityAsHost = hosts == 0 ? authority : nil
        switch self.method {
        case .GET, .HEAD, .DELETE, .CONNECT, .TRACE:
            addedFraming = .none  // framed by `HTTP2StreamAdapter` once the stream shows whether a body follows
        default:
            addedFraming = hasLength ? .none : (endStream ? .emptyLength : .chunked)
        }
    }

    /// A pseudo-header's value, once, without a byte that could split an
    /// HTTP/1 request line (control characters, space, DEL).
    private static func pseudo(_ name: String, _ value: String, seen: String?) throws -> String {
        guard seen == nil else { throw HTTP2HeaderBlocks.Malformed.duplicatePseudoHeader(name) }
        guard !value.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw HTTP2HeaderBlocks.Malformed.invalidPseudoHeaderValue(name) }
        return value
    }

    /// A head with neither `content-length` nor `transfer-encoding`.
    var framesNothing: Bool {
        addedFraming == .none && !chunkedAtEnd && !block.contains { field in
            MessageRules.asciiEqualsIgnoringCase(field.name, "content-length") || MessageRules.asciiEqualsIgnoringCase(field.name, "transfer-encoding")
        }
    }

    /// The head now goes on framed `chunked`: a body follows a head that framed none.
    mutating func frameChunked() {
        chunkedAtEnd = true
    }

    /// The whole head's fields in order, each with the indexing the block
    /// gave it (`.indexable` for those the head adds): `Host` from
    /// `:authority`, the added framing field, the block's own fields, then
    /// `chunked` once framed so.
    func forEachField(_ body: (String, String, HPACKIndexing) -> Void) {
        if let authorityAsHost { body("host", authorityAsHost, .indexable) }
        switch addedFraming {
        case .none: break
        case .emptyLength: body("content-length", "0", .indexable)
        case .chunked: body("transfer-encoding", "chunked", .indexable)
        }
        for (name, value, indexing) in block where name.utf8.first != UInt8(ascii: ":") {
            body(name, value, indexing)
        }
        if chunkedAtEnd { body("transfer-encoding", "chunked", .indexable) }
    }

    /// As the whole head's: HTTP/2's version keeps nothing alive by default
    /// (the exchange closes each stream's "connection", and so adds
    /// `Connection: close` to every response: `HTTP2HeaderBlocks` drops it),
    /// so only a `Connection` field (HTTP/2 forbids one) could say otherwise.
    var isKeepAlive: Bool {
        guard block.contains(where: { MessageRules.asciiEqualsIgnoringCase($0.name, "connection") }) else { return false }
        return whole.isKeepAlive
    }

    /// NIO's head for the same request, as its HTTP/1 codec made it.
    var whole: HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(block.count + 1)
        forEachField { name, value, _ in headers.add(name: name, value: value) }
        return HTTPRequestHead(version: .http2, method: method, uri: path, headers: headers)
    }
}
