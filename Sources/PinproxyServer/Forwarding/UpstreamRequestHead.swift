import NIOCore
import NIOHTTP1
import PinproxyHTTP1
import PinproxyHTTP1NIO

/// The head an exchange sends upstream: NIO's head, edited whole
/// (`MessageRules.upstreamHead`), or the app's head kept as it came with
/// the same edits listed: its bytes (`ForwardedRequestHead`), which the
/// upstream's HTTP/1.1 writer writes from those bytes, or its HTTP/2 header
/// block (`ForwardedRequestBlock`), which an HTTP/2 upstream's stream is
/// sent as a block. Each takes the edits made after routing (a credential's
/// header, a WebSocket handshake's fields) as NIO's `HTTPHeaders` takes them.
///
/// Optionals rather than an enum: the route holds it and the edits after
/// routing change it where it is held, which an enum's payload, taken out
/// and put back, would copy (its field lists with it).
struct UpstreamRequestHead: UpstreamFieldEditing {
    /// Exactly one is set.
    private(set) var wholeHead: HTTPRequestHead?
    private(set) var forwarded: ForwardedRequestHead?
    private(set) var block: ForwardedRequestBlock?

    static func whole(_ head: HTTPRequestHead) -> UpstreamRequestHead {
        UpstreamRequestHead(wholeHead: head)
    }

    static func forwarded(_ head: ForwardedRequestHead) -> UpstreamRequestHead {
        UpstreamRequestHead(forwarded: head)
    }

    static func block(_ head: ForwardedRequestBlock) -> UpstreamRequestHead {
        UpstreamRequestHead(block: head)
    }

    func contains(name: String) -> Bool {
        if let wholeHead { return wholeHead.headers.contains(name: name) }
        if let forwarded { return forwarded.contains(name: name) }
        return block!.contains(name: name)
    }

    mutating func add(name: String, value: String) {
        if wholeHead != nil {
            wholeHead!.headers.add(name: name, value: value)
        } else if forwarded != nil {
            forwarded!.add(name: name, value: value)
        } else {
            block!.add(name: name, value: value)
        }
    }

    mutating func remove(name: String) {
        if wholeHead != nil {
            wholeHead!.headers.remove(name: name)
        } else if forwarded != nil {
            forwarded!.remove(name: name)
        } else {
            block!.remove(name: name)
        }
    }

    mutating func replaceOrAdd(name: String, value: String) {
        if wholeHead != nil {
            wholeHead!.headers.replaceOrAdd(name: name, value: value)
        } else if forwarded != nil {
            forwarded!.replaceOrAdd(name: name, value: value)
        } else {
            block!.replaceOrAdd(name: name, value: value)
        }
    }

    /// NIO's head with the same fields in the same order (an upstream in
    /// the other protocol, and the tests that compare the ways).
    var whole: HTTPRequestHead {
        wholeHead ?? forwarded?.whole ?? block!.whole
    }
}

/// An app's HTTP/1.1 request head forwarded as its bytes: its request line
/// (origin-form: the target goes up as it came) and its fields, but for the
/// hop-by-hop ones and those its `Connection` fields name
/// (`MessageRules.withForwardedFields`) and those its `edits` remove, then
/// the fields they add: the edits `MessageRules.upstreamHead` makes to a
/// whole head, in the same order, so that the bytes are those that head
/// would be written as (`ForwardedRequestTests`).
struct ForwardedRequestHead: EditedAsListed {
    let app: RequestHeadBytes
    var edits = UpstreamFieldEdits()

    init(app: RequestHeadBytes) {
        self.app = app
    }

    func contains(name: String) -> Bool {
        if edits.added.contains(name: name) { return true }
        var name = name
        return name.withUTF8 { name in
            MessageRules.withForwardedFields(of: app.bytes, app.parsed) { forwarded in
                app.bytes.withUnsafeReadableBytes { bytes in
                    app.parsed.fields.contains { field in
                        let fieldName = field.name.bytes(in: bytes)
                        return FieldNames.equal(fieldName, UnsafeRawBufferPointer(name)) && keeps(fieldName, forwarded: forwarded)
                    }
                }
            }
        }
    }

    /// Whether the app's field named by `name`'s bytes goes up.
    func keeps(_ name: UnsafeRawBufferPointer, forwarded: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        forwarded(name) && !edits.removes(name)
    }

    var whole: HTTPRequestHead {
        var headers = HTTPHeaders()
        MessageRules.withForwardedFields(of: app.bytes, app.parsed) { forwarded in
            app.bytes.withUnsafeReadableBytes { bytes in
                for field in app.parsed.fields where keeps(field.name.bytes(in: bytes), forwarded: forwarded) {
                    headers.add(name: field.name.text(in: bytes), value: field.value.text(in: bytes))
                }
            }
        }
        headers.add(contentsOf: edits.added)
        return HTTPRequestHead(version: .http1_1, method: app.method, uri: app.target, headers: headers)
    }

    /// Hands the head to an upstream connection's HTTP/1.1 writer.
    func write(to writer: RequestWriter, promise: EventLoopPromise<Void>?) {
        MessageRules.withForwardedFields(of: app.bytes, app.parsed) { forwarded in
            writer.writeForwarded(app.bytes, app.parsed, keeps: { keeps($0, forwarded: forwarded) }, added: edits.added, promise: promise)
        }
    }
}

/// The edits `MessageRules.upstreamHead` makes to a whole head's fields,
/// listed for a head forwarded as the app's own (its bytes, its HTTP/2
/// block): the names of the app's fields that do not go up besides the
/// hop-by-hop ones, and the fields that go after the app's.
struct UpstreamFieldEdits {
    /// Lowercase: the policy's removals and sets, the framing fields, a
    /// credential's header.
    private(set) var removed = Self.framingFields
    /// `te: trailers`, the policy's sets, the framing field, `Via`, a credential's.
    private(set) var added = HTTPHeaders()

    /// Every forwarded head loses the app's framing fields (pinproxy writes
    /// its own: `RequestFraming.apply`), so the list starts with them: a
    /// list shared by every head, not one made for each.
    private static let framingFields = ["content-length", "transfer-encoding"]

    /// As `HTTPHeaders.remove(name:)` on the whole head: the app's fields of
    /// that name and those added so far.
    mutating func remove(name: String) {
        // Compared before a lowercase copy is made: `transfer-encoding` is
        // too long for a string kept inline, and every head removes it.
        var spelt = name
        if !spelt.withUTF8({ Self.lists(removed, UnsafeRawBufferPointer($0)) }) { removed.append(name.lowercased()) }
        // `HTTPHeaders.remove` rebuilds its list even when nothing goes.
        if added.contains(name: name) { added.remove(name: name) }
    }

    mutating func add(name: String, value: String) {
        added.add(name: name, value: value)
    }

    /// As `HTTPHeaders.replaceOrAdd`: every field of that name goes, one comes last.
    mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// Whether the app's field named by `name`'s bytes was removed, ASCII case aside.
    func removes(_ name: UnsafeRawBufferPointer) -> Bool {
        Self.lists(removed, name)
    }

    /// Whether `names` (lowercase) hold the name `name`'s bytes spell, ASCII case aside.
    private static func lists(_ names: [String], _ name: UnsafeRawBufferPointer) -> Bool {
        names.contains { listed in
            var listed = listed
            return listed.utf8.count == name.count && listed.withUTF8 { FieldNames.equal(UnsafeRawBufferPointer($0), name) }
        }
    }
}

/// A head forwarded as the app's own, edited through its list.
protocol EditedAsListed: UpstreamFieldEditing {
    var edits: UpstreamFieldEdits { get set }
}

extension EditedAsListed {
    mutating func remove(name: String) {
        edits.remove(name: name)
    }

    mutating func add(name: String, value: String) {
        edits.add(name: name, value: value)
    }

    mutating func replaceOrAdd(name: String, value: String) {
        edits.replaceOrAdd(name: name, value: value)
    }
}

/// The edits `MessageRules.upstreamHead` makes to a head's fields, as
/// NIO's `HTTPHeaders` makes them (names compared without case), so that one
/// sequence of edits serves a whole head and one forwarded as its bytes.
protocol UpstreamFieldEditing {
    func contains(name: String) -> Bool
    mutating func add(name: String, value: String)
    mutating func remove(name: String)
    mutating func replaceOrAdd(name: String, value: String)
}

extension HTTPHeaders: UpstreamFieldEditing {}
