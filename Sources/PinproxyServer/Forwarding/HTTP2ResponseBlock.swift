import NIOHPACK
import NIOHTTP1

/// An HTTP/2 upstream's response head as the header block it came in. An
/// app on HTTP/2 is sent that block edited (`forwarded`), not a head made
/// whole and turned back into a block: the same fields, without three
/// conversions and their copies per stream (issue 33). An app on HTTP/1.1,
/// and what reads a head whole (a `101`, an informational answer), get the
/// head made whole (`head`), as swift-nio-http2's HTTP/1 codec made it.
struct HTTP2ResponseBlock: Equatable {
    /// The block as it arrived: `:status` and the fields, in order.
    let block: HPACKHeaders
    /// The status (three digits), and the framing field the whole head
    /// adds: small, so that a response part holding this fits in the
    /// pipeline's inline storage (one allocation fewer for each of its parts).
    private let code: Int16
    private let framing: AddedFraming

    /// The field the whole head adds for a final response that may have a
    /// body and declares no length, as NIO's codec framed it.
    enum AddedFraming: UInt8 {
        case none
        /// `content-length: 0`: the block ended the stream.
        case emptyLength
        /// `transfer-encoding: chunked`: DATA may follow.
        case chunked
    }

    var status: Int { Int(code) }

    /// The head of `block`, the answer to a `method` request; `endStream`:
    /// whether the block ended the stream. Refused (the stream is reset)
    /// without exactly one `:status` of three digits.
    init(_ block: HPACKHeaders, request method: HTTPMethod, endStream: Bool) throws {
        var status: Int16?
        var hasLength = false
        for (name, value, _) in block {
            if name == ":status" {
                guard status == nil, value.utf8.count == 3, let code = Int16(value) else {
                    throw HTTP2HeaderBlocks.Malformed.invalidStatus
                }
                status = code
            } else if name == "content-length" {
                hasLength = true
            }
        }
        guard let status else { throw HTTP2HeaderBlocks.Malformed.missingPseudoHeader(":status") }
        self.block = block
        code = status
        let mayHaveBody = status >= 200 && status != 204 && status != 304 && method != .HEAD && method != .CONNECT
        framing = mayHaveBody && !hasLength ? (endStream ? .emptyLength : .chunked) : .none
    }

    /// The head made whole: the block's fields, then the added framing.
    var head: HTTPResponseHead {
        var headers = HTTP2HeaderBlocks.fields(block)
        switch framing {
        case .none: break
        case .emptyLength: headers.add(name: "content-length", value: "0")
        case .chunked: headers.add(name: "transfer-encoding", value: "chunked")
        }
        return HTTPResponseHead(version: .http2, status: HTTPResponseStatus(statusCode: status), headers: headers)
    }

    /// The first value of a field named `lowercaseName` (HTTP/2's names are lowercase).
    func first(_ lowercaseName: StaticString) -> String? {
        block.first(name: "\(lowercaseName)")
    }

    /// The block an app's HTTP/2 stream is sent: what
    /// `HTTP2HeaderBlocks.responseBlock(MessageRules.clientHead(from: head, closing:))`
    /// makes, field for field (`HTTP2ResponseBlockTests` compares the two),
    /// each field keeping the upstream's indexing, so one it sent
    /// never-indexed goes on never-indexed (RFC 7541 §7.1.3). A block with a
    /// `Connection` field (HTTP/2 forbids one, and `NIOHTTP2Handler` refuses
    /// it before it gets here) takes that longer way.
    func forwarded(closing: Bool) -> HPACKHeaders {
        if block.contains(where: { $0.name.utf8.count == 10 && MessageRules.asciiEqualsIgnoringCase($0.name, "connection") }) {
            return HTTP2HeaderBlocks.responseBlock(MessageRules.clientHead(from: head, closing: closing))
        }
        var forwarded = HPACKHeaders()
        forwarded.reserveCapacity(block.count + 2)
        forwarded.add(name: ":status", value: String(status))
        for (name, value, indexing) in block where name.utf8.first != UInt8(ascii: ":") {
            let lower = HTTP2HeaderBlocks.lowercased(name)
            // The fields `clientHead` strips (hop-by-hop) and `responseBlock`
            // drops (those HTTP/2 forbids: the same, and `transfer-encoding`);
            // and, when the head says `Connection: close`, one named `close`.
            if MessageRules.isHopByHop(lower) || lower == "transfer-encoding" || (closing && lower == "close") { continue }
            forwarded.add(name: lower, value: value, indexing: indexing)
        }
        // `transfer-encoding` would be left out as any is.
        if framing == .emptyLength { forwarded.add(name: "content-length", value: "0") }
        forwarded.add(name: "via", value: Via.value(receivedIn: .http2))
        return forwarded
    }
}
