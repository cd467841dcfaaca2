import NIOHPACK
import NIOHTTP1

/// Header blocks of an HTTP/2 stream to and from the heads an exchange
/// speaks, in one pass each, with the rules swift-nio-http2's HTTP/1 codec
/// pair applied (docs/contract.md §11). `NIOHTTP2Handler`'s own validation
/// (pseudo-header order and set, field names and values, connection-specific
/// fields, `te`, trailers, `content-length` against DATA) runs before a block
/// reaches these and stays on; what is checked here again is what a head is
/// built from, so a stream fed frames without that handler (the fuzz target)
/// is refused the same.
enum HTTP2HeaderBlocks {
    /// Why a header block cannot become a head: the stream is refused (reset).
    enum Malformed: Error, Equatable {
        case missingPseudoHeader(String)
        case duplicatePseudoHeader(String)
        case invalidPseudoHeaderValue(String)
        /// Neither `:authority` nor exactly one `host` (RFC 9113 §8.3.1).
        case noAuthority
        case invalidStatus
        /// An HTTP/1 head upstream without exactly one `Host` to become `:authority`.
        case requestWithoutHost
    }

    // MARK: Requests (app → exchange): the head is `AppRequestBlock`

    /// A trailers block's fields (pseudo-headers are NIO's validation's to refuse).
    static func fields(_ block: HPACKHeaders) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(block.count)
        for (name, value, _) in block where name.utf8.first != UInt8(ascii: ":") {
            headers.add(name: name, value: value)
        }
        return headers
    }

    // MARK: Responses (exchange → app)

    /// The block for a response head: `:status`, then its fields with names
    /// lowercased and the connection-specific ones HTTP/2 forbids (RFC 9113
    /// §8.2.2; and those `Connection` names) left out, as NIO's codec
    /// normalised them.
    static func responseBlock(_ head: HTTPResponseHead) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(head.headers.count + 1)
        block.add(name: ":status", value: String(head.status.code))
        appendNormalised(head.headers, to: &block)
        return block
    }

    /// A trailers block.
    static func trailerBlock(_ trailers: HTTPHeaders) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(trailers.count)
        appendNormalised(trailers, to: &block)
        return block
    }

    /// `headers` onto `block`, normalised; `droppingHost`: a request's `Host`
    /// already went as its `:authority`.
    static func appendNormalised(_ headers: HTTPHeaders, to block: inout HPACKHeaders, droppingHost: Bool = false) {
        // Only a head with a `Connection` field naming other fields has more to
        // drop (rare: the exchange strips hop-by-hop). `Connection: close`,
        // which the exchange adds to the last response of a connection and so
        // to every response on a stream, names none: told apart without the
        // set and the split values (five allocations per h2 response, issue 33).
        let options = connectionOptions(headers)
        let named = options == .others ? Set(headers[canonicalForm: "connection"].map { $0.lowercased() }) : []
        for (name, value) in headers {
            let lower = lowercased(name)
            if isDropped(lower, droppingHost: droppingHost, options: options) || (!named.isEmpty && named.contains(lower)) { continue }
            block.add(name: lower, value: value)
        }
    }

    /// Whether the lowercased `name` is a field HTTP/2 forbids, or `host`
    /// when it went as `:authority`, or `close` when `Connection: close`
    /// named it. Told apart by length first: a string switch compared every
    /// field with each name in turn (about a microsecond per h2 request).
    static func isDropped(_ name: String, droppingHost: Bool, options: ConnectionOptions) -> Bool {
        switch name.utf8.count {
        case 4: return droppingHost && name == "host"
        case 5: return options == .close && name == "close"
        case 7: return name == "upgrade"
        case 10: return name == "connection" || name == "keep-alive"
        case 16: return name == "proxy-connection"
        case 17: return name == "transfer-encoding"
        default: return false
        }
    }

    /// What the `Connection` fields name, as far as dropping fields goes.
    enum ConnectionOptions: Equatable {
        case none
        /// `close` (and perhaps `keep-alive`, dropped anyway) and nothing else.
        case close
        /// Something else: the fields it names are dropped too.
        case others
    }

    static func connectionOptions(_ headers: HTTPHeaders) -> ConnectionOptions {
        var options = ConnectionOptions.none
        for (name, value) in headers where name.utf8.count == 10 && MessageRules.asciiEqualsIgnoringCase(name, "connection") {
            if MessageRules.asciiEqualsIgnoringCase(value, "close") {
                options = .close
            } else if !MessageRules.asciiEqualsIgnoringCase(value, "keep-alive") {
                return .others
            }
        }
        return options
    }

    /// `name` in lowercase, without a new string when it already is.
    static func lowercased(_ name: String) -> String {
        name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) ? name.lowercased() : name
    }
}
