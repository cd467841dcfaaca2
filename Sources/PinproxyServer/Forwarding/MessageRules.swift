import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO
import PinproxyPolicy

/// The HTTP/1.1 rules a proxy owes (RFC 9110 §7.6, RFC 9112 §6): which
/// headers are hop-by-hop, `Via`, the heads sent each way. Framing is
/// `RequestFraming`'s.
enum MessageRules {
    /// Headers that describe one connection, never forwarded.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "upgrade",
    ]

    /// More header fields than this in a request head are refused with 431
    /// (Envoy's default is 100; legitimate heads are far below either).
    static let maxHeaderCount = 256

    /// Removes hop-by-hop headers, and those the Connection header names, in
    /// one pass over the head: linear in its size whatever the client sends
    /// (a quadratic strip let one crafted head cost seconds of event-loop CPU).
    /// `Transfer-Encoding` is left to the framing rules, which rewrite it.
    static func stripHopByHop(_ headers: inout HTTPHeaders) {
        // The common head names no hop-by-hop field at all: found without
        // allocating (names compared as ASCII, case folded byte by byte).
        var named: Set<String> = []
        var found = 0
        var onlyConnection = true
        for (name, value) in headers where isHopByHop(name) {
            found += 1
            guard name.utf8.count == 10, asciiEqualsIgnoringCase(name, "connection") else { onlyConnection = false; continue }
            // `keep-alive` and `close` name nothing that is not removed anyway.
            if asciiEqualsIgnoringCase(value, "keep-alive") || asciiEqualsIgnoringCase(value, "close") { continue }
            for token in value.split(separator: ",") {
                named.insert(token.trimmingSpaces.lowercased())
            }
        }
        guard found > 0 else { return }  // the common head: no hop-by-hop field, nothing named
        named.remove("transfer-encoding")
        if named.isEmpty && onlyConnection {
            // The common response (`Connection: keep-alive`): one field out, in place.
            headers.remove(name: "connection")
            return
        }
        var kept = HTTPHeaders()
        kept.reserveCapacity(headers.count)
        for (name, value) in headers where !isHopByHop(name) && (named.isEmpty || !named.contains(name.lowercased())) {
            kept.add(name: name, value: value)
        }
        headers = kept
    }

    /// Whether `name` is one of `hopByHop`, without allocating (compared
    /// over its bytes, as a head kept as bytes is).
    static func isHopByHop(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { isHopByHop(UnsafeRawBufferPointer($0)) }
    }

    /// `text` equals the lowercase ASCII `lower`, ignoring ASCII case.
    static func asciiEqualsIgnoringCase(_ text: String, _ lower: StaticString) -> Bool {
        guard text.utf8.count == lower.utf8CodeUnitCount else { return false }
        return lower.withUTF8Buffer { expected in
            // Over the text's bytes in place (every native string has them):
            // stepping through a `UTF8View` cost more than the comparing, and
            // every head is scanned with this several times.
            if let equal = text.utf8.withContiguousStorageIfAvailable({ bytes in
                for index in 0..<bytes.count where FieldNames.folded(bytes[index]) != expected[index] { return false }
                return true
            }) {
                return equal
            }
            var index = 0
            for byte in text.utf8 {
                if FieldNames.folded(byte) != expected[index] { return false }
                index += 1
            }
            return true
        }
    }

    /// The size of a head as it stands on the wire (request line, fields with
    /// their separators, the blank line): what `max_header_bytes` limits.
    static func wireSize(_ head: HTTPRequestHead) -> Int {
        var size = head.method.rawValue.utf8.count + head.uri.utf8.count + 12  // " ", " HTTP/1.1\r\n"
        for (name, value) in head.headers {
            size += name.utf8.count + value.utf8.count + 4  // ": ", "\r\n"
        }
        return size + 2
    }

    /// How many `Host` fields the head has, and the first one's value,
    /// without building the array `headers["host"]` would.
    static func hostFields(_ headers: HTTPHeaders) -> (count: Int, first: String?) {
        var count = 0
        var first: String?
        for (name, value) in headers where name.utf8.count == 4 && asciiEqualsIgnoringCase(name, "host") {
            count += 1
            if first == nil { first = value }
        }
        return (count, first)
    }

    /// Whether the client asked to close after this exchange.
    static func wantsClose(_ head: HTTPRequestHead) -> Bool {
        !head.isKeepAlive
    }

    /// The head sent upstream: origin-form target, hop-by-hop removed, the
    /// policy's header rules applied, `Via` added. The Host header stays.
    /// Framing comes last, so neither a client's `Connection` header nor a
    /// policy's header rules can change how the body is delimited.
    ///
    /// Built from the app's head itself, not a new one: its method, target
    /// and version live in one shared box that is copied only when the
    /// target or version changes (an origin-form HTTP/1.1 request, the
    /// common one, keeps it), and its fields are copied once, with room for
    /// what is added here (issue 33: a head box and a regrown field array
    /// per request).
    static func upstreamHead(from head: HTTPRequestHead, target: String, hostHeader: String, rules: HeaderRules?, framing: RequestFraming) -> HTTPRequestHead {
        var upstream = head
        if upstream.uri != target { upstream.uri = target }
        if upstream.version != .http1_1 { upstream.version = .http1_1 }
        let trailers = acceptsTrailers(head.headers)
        // Via, and perhaps Host, TE and a framing field.
        upstream.headers.reserveCapacity(head.headers.count + 4)
        stripHopByHop(&upstream.headers)
        editUpstream(&upstream.headers, trailers: trailers, hostHeader: hostHeader, rules: rules, framing: framing,
                     via: Via.value(receivedIn: head.version))
        return upstream
    }

    /// The same head for an app's HTTP/1.1 head kept as its bytes: the same
    /// edits, listed (`ForwardedRequestHead`), the target as it came (the
    /// caller forwards only an origin-form one).
    static func forwardedHead(from app: RequestHeadBytes, hostHeader: String, rules: HeaderRules?, framing: RequestFraming) -> ForwardedRequestHead {
        var upstream = ForwardedRequestHead(app: app)
        editUpstream(&upstream, trailers: acceptsTrailers(app), hostHeader: hostHeader, rules: rules, framing: framing,
                     via: Via.value(receivedIn: app.version))
        return upstream
    }

    /// The same for an app's HTTP/2 head kept as its block: the same edits,
    /// listed (`ForwardedRequestBlock`).
    static func forwardedBlock(from app: AppRequestBlock, hostHeader: String, rules: HeaderRules?, framing: RequestFraming) -> ForwardedRequestBlock {
        var upstream = ForwardedRequestBlock(app: app)
        var teValues: [String] = []
        app.forEachField { name, value, _ in
            if name.utf8.count == 2 && asciiEqualsIgnoringCase(name, "te") { teValues.append(value) }
        }
        editUpstream(&upstream, trailers: acceptsTrailers(teValues), hostHeader: hostHeader, rules: rules, framing: framing,
                     via: Via.value(receivedIn: .http2))
        return upstream
    }

    /// What `upstreamHead` does to a head's fields after the hop-by-hop
    /// strip, in one place for both kinds of head: `te: trailers` kept (the
    /// one TE HTTP/2 allows, and gRPC needs it end to end, docs/contract.md
    /// §11; any other TE value stays hop-by-hop), Host if there is none, the
    /// policy's header rules, the framing field, `Via`.
    private static func editUpstream<Fields: UpstreamFieldEditing>(_ fields: inout Fields, trailers: Bool, hostHeader: String,
                                                                    rules: HeaderRules?, framing: RequestFraming, via: String) {
        if trailers { fields.add(name: "te", value: "trailers") }
        if !fields.contains(name: "host") { fields.add(name: "Host", value: hostHeader) }
        if let rules {
            for name in rules.remove { fields.remove(name: name) }
            for field in rules.set { fields.replaceOrAdd(name: field.name, value: field.value) }
        }
        framing.apply(to: &fields)
        fields.add(name: "Via", value: via)
    }

    /// Whether the request's TE names `trailers` (RFC 9110 §10.1.4).
    static func acceptsTrailers(_ headers: HTTPHeaders) -> Bool {
        acceptsTrailers(headers["te"])
    }

    /// The same, given the `TE` fields' values.
    static func acceptsTrailers(_ values: [String]) -> Bool {
        values.contains { value in
            value.split(separator: ",").contains { ($0.split(separator: ";").first ?? "").trimmingSpaces.lowercased() == "trailers" }
        }
    }

    /// The same, read from a head's bytes: a `TE` element whose coding,
    /// before any `;` parameters, is `trailers`.
    static func acceptsTrailers(_ head: RequestHeadBytes) -> Bool {
        head.bytes.withUnsafeReadableBytes { bytes in
            var trailers = false
            for field in head.parsed.fields where FieldNames.equal(field.name.bytes(in: bytes), "te") {
                FieldNames.forEachToken(bytes, field.value) { element in
                    // The first piece between semicolons that is not empty,
                    // as `split(separator:)` finds it, without its spaces.
                    var first = element.start
                    while first < element.end && bytes[first] == UInt8(ascii: ";") { first += 1 }
                    var end = first
                    while end < element.end && bytes[end] != UInt8(ascii: ";") { end += 1 }
                    while first < end && (bytes[first] == 0x20 || bytes[first] == 0x09) { first += 1 }
                    while end > first && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
                    if FieldNames.equal(ByteSpan(start: first, count: end - first).bytes(in: bytes), "trailers") { trailers = true }
                }
            }
            return trailers
        }
    }

    /// `stripHopByHop`'s choice for a head kept as bytes (`ResponseHeadBytes`),
    /// given to `body` as whether a field of that name goes on: hop-by-hop
    /// fields and those its `Connection` fields name (but `Transfer-Encoding`)
    /// stay behind. The names are compared in place; the common head names
    /// none, and nothing is allocated for it.
    static func withForwardedFields<Result>(of head: ResponseHeadBytes,
                                            _ body: ((UnsafeRawBufferPointer) -> Bool) -> Result) -> Result {
        withForwardedFields(of: head.bytes, head.parsed, body)
    }

    /// The same for any head kept as bytes (an app's request's too).
    static func withForwardedFields<Result>(of head: ByteBuffer, _ parsed: ParsedHead,
                                            _ body: ((UnsafeRawBufferPointer) -> Bool) -> Result) -> Result {
        head.withUnsafeReadableBytes { bytes in
            var named: [ByteSpan] = []
            for field in parsed.fields where FieldNames.equal(field.name.bytes(in: bytes), "connection") {
                // `keep-alive` and `close` name nothing that is not removed anyway.
                let value = field.value.bytes(in: bytes)
                if FieldNames.equal(value, "keep-alive") || FieldNames.equal(value, "close") { continue }
                FieldNames.forEachToken(bytes, field.value) { token in
                    if !FieldNames.equal(token.bytes(in: bytes), "transfer-encoding") { named.append(token) }
                }
            }
            return body { name in
                !isHopByHop(name) && !named.contains { FieldNames.equal($0.bytes(in: bytes), name) }
            }
        }
    }

    /// Hands an upstream's head kept as bytes to the app's HTTP/1.1 writer,
    /// edited as `clientHead` edits a whole head: the fields
    /// `withForwardedFields` keeps, then `Via` and, when `closing`,
    /// `Connection: close`.
    static func writeForwarded(_ head: ResponseHeadBytes, closing: Bool, to writer: ResponseWriter) {
        withForwardedFields(of: head) { keeps in
            writer.writeForwarded(head, keeps: keeps, via: Via.wireValue(receivedIn: head.version), closing: closing, promise: nil)
        }
    }

    /// Whether a name's bytes spell one of `hopByHop`, ASCII case aside.
    static func isHopByHop(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
        case 2: return FieldNames.equal(name, "te")
        case 7: return FieldNames.equal(name, "trailer") || FieldNames.equal(name, "upgrade")
        case 10: return FieldNames.equal(name, "connection") || FieldNames.equal(name, "keep-alive")
        case 16: return FieldNames.equal(name, "proxy-connection")
        case 18: return FieldNames.equal(name, "proxy-authenticate")
        case 19: return FieldNames.equal(name, "proxy-authorization")
        default: return false
        }
    }

    /// The head sent back to the client: hop-by-hop removed, `Via` added.
    /// Made from the upstream's head as `upstreamHead` is from the app's:
    /// its status box kept unless the version changes, its fields copied once.
    static func clientHead(from head: HTTPResponseHead, closing: Bool) -> HTTPResponseHead {
        var client = head
        if client.version != .http1_1 { client.version = .http1_1 }
        // Via, and perhaps `Connection: close`.
        client.headers.reserveCapacity(head.headers.count + 2)
        stripHopByHop(&client.headers)
        client.headers.add(name: "Via", value: Via.value(receivedIn: head.version))
        if closing { client.headers.replaceOrAdd(name: "Connection", value: "close") }
        return client
    }

    /// The upstream's `101` to a WebSocket upgrade, for the app: hop-by-hop
    /// removed like any head, then `Upgrade` and `Connection: Upgrade` put
    /// back (the `Sec-WebSocket-*` fields are end-to-end and stay).
    static func switchingHead(from head: HTTPResponseHead) -> HTTPResponseHead {
        var headers = head.headers
        let upgrade = head.headers["upgrade"].first ?? "websocket"
        stripHopByHop(&headers)
        addUpgradeFields(&headers, protocol: upgrade)
        headers.add(name: "Via", value: Via.value)
        return HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers)
    }

    /// `Upgrade: name` and `Connection: Upgrade`, for a WebSocket handshake
    /// kept whole (docs/contract.md §11).
    static func addUpgradeFields<Fields: UpstreamFieldEditing>(_ headers: inout Fields, protocol name: String) {
        headers.replaceOrAdd(name: "Upgrade", value: name)
        headers.replaceOrAdd(name: "Connection", value: "Upgrade")
    }

    /// Whether the HTTP/1.1 decoder takes this request as a protocol switch:
    /// an `Upgrade` field with `upgrade` among the `Connection` tokens. The
    /// decoder parses nothing after such a request, so unless it becomes a
    /// splice the connection ends with its answer.
    static func asksUpgrade(_ head: HTTPRequestHead) -> Bool {
        !head.headers["upgrade"].isEmpty && tokens(head.headers, "connection").contains("upgrade")
    }

    /// A WebSocket opening handshake (RFC 6455 §4.1): HTTP/1.1 GET whose
    /// `Upgrade` names `websocket` and whose `Connection` names `upgrade`.
    /// Other upgrades (`h2c`, `TLS/1.2`…) are stripped as before.
    static func asksWebSocket(_ head: HTTPRequestHead) -> Bool {
        asksUpgrade(head) && head.method == .GET && head.version == .http1_1 && tokens(head.headers, "upgrade").contains("websocket")
    }

    /// The comma-separated tokens of every `name` field, lowercased.
    private static func tokens(_ headers: HTTPHeaders, _ name: String) -> [String] {
        headers[name].flatMap { $0.split(separator: ",").map { $0.trimmingSpaces.lowercased() } }
    }

    /// A response that said it would close its connection cannot be pooled.
    static func upstreamKeepsAlive(_ head: HTTPResponseHead) -> Bool {
        head.isKeepAlive
    }
}
