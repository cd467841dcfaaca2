/// Reads a connection's stream of HTTP/1 messages (requests, or responses)
/// as it arrives, read by read: the pure core a channel handler wraps. It
/// says where each head, each run of body bytes and each message's end lies
/// in the bytes it is given; the caller keeps the bytes it did not consume
/// (a head not yet whole) and gives them again with more.
public struct MessageReader: Sendable {
    /// What the reader found in the bytes of one `read`.
    public enum Event: Sendable {
        /// A head, its spans counted from `at`, and how its body is framed.
        case head(ParsedHead, at: Int, framing: BodyFraming)
        /// Body bytes.
        case body(ByteSpan)
        /// The message's end, with a chunked body's trailers (else empty).
        case end(trailers: [(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)])
    }

    /// Where the reader is in the stream.
    enum State: Sendable {
        /// Between messages, or in a head whose end has not come: searched
        /// this far for it.
        case head(HeadParser.Search)
        /// In a body of so many more bytes.
        case length(UInt64)
        case chunked(ChunkedBody)
        /// In a response body that ends when the connection does.
        case untilClose
        /// After a message that ends the connection: nothing may follow.
        case closed
        /// After a head that leaves HTTP/1 (CONNECT, an upgrade): what
        /// follows is the caller's.
        case switched
    }

    public let parser: HeadParser
    private(set) var state = State.head(HeadParser.Search())
    /// Whether the message being read ends its connection, or ends HTTP/1
    /// on it (an upgrade request, once its body is read).
    private var lastOnConnection = false
    private var upgradesAfter = false
    /// Responses: for each request sent and not yet answered, whether its
    /// answer has no body whatever its head says (HEAD, CONNECT).
    private var answersWithoutBody: [Bool] = []

    public init(parser: HeadParser) {
        self.parser = parser
    }

    /// Responses: a request went out, and its answer will come in order.
    public mutating func requestSent(expectingNoBody: Bool) {
        answersWithoutBody.append(expectingNoBody)
    }

    /// Whether the stream has left HTTP/1 (what follows a CONNECT's or an
    /// upgrade's head is not a message).
    public var hasSwitchedProtocol: Bool {
        if case .switched = state { return true }
        return false
    }

    /// Reads `bytes`; returns how many it consumed. `emit` gets each event,
    /// in order, while the bytes are still valid.
    public mutating func read(_ bytes: UnsafeRawBufferPointer, _ emit: (Event) -> Void) throws(MessageRefusal) -> Int {
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch state {
            case .head(var search):
                let outcome = parser.parse(rest, search: &search)
                switch outcome {
                case .incomplete:
                    state = .head(search)
                    return offset
                case .refused(let refusal):
                    throw .head(refusal)
                case .head(let head):
                    try begin(head, in: rest, at: offset, emit)
                    offset += head.length
                }
            case .length(let remaining):
                let count = Int(min(remaining, UInt64(rest.count)))
                emit(.body(ByteSpan(start: offset, count: count)))
                offset += count
                if UInt64(count) == remaining { finishMessage(trailers: [], emit) } else { state = .length(remaining - UInt64(count)) }
            case .chunked(var body):
                let outcome: ChunkedBody.Outcome
                do {
                    outcome = try body.read(rest) { emit(.body(ByteSpan(start: offset + $0.start, count: $0.count))) }
                } catch {
                    throw .chunked(error)
                }
                switch outcome {
                case .needMore:
                    state = .chunked(body)
                    return bytes.count
                case .ended(let consumed):
                    offset += consumed
                    finishMessage(trailers: body.trailers, emit)
                }
            case .untilClose:
                emit(.body(ByteSpan(start: offset, count: rest.count)))
                return bytes.count
            case .closed:
                throw .afterLastMessage
            case .switched:
                return offset
            }
        }
        return offset
    }

    /// The connection closed, with `unconsumedBytes` of it never consumed.
    /// A response read to its close ends here; a message cut off anywhere
    /// else (a head begun among those bytes among them) is refused.
    public mutating func connectionClosed(unconsumedBytes: Int, _ emit: (Event) -> Void) throws(MessageRefusal) {
        switch state {
        case .untilClose:
            finishMessage(trailers: [], emit)
        case .head:
            if unconsumedBytes > 0 { throw .cutOff }
        case .closed, .switched:
            break
        case .length, .chunked:
            throw .cutOff
        }
    }

    private mutating func begin(_ head: ParsedHead, in bytes: UnsafeRawBufferPointer, at offset: Int, _ emit: (Event) -> Void) throws(MessageRefusal) {
        let framing: BodyFraming
        switch parser.kind {
        case .request:
            do { framing = try head.requestFraming(in: bytes).get() } catch { throw .framing(error) }
        case .response:
            // An informational answer (not 101) is not the request's answer: that follows it.
            let informational = head.status < 200 && head.status != 101
            guard let noBody = informational ? answersWithoutBody.first : answersWithoutBody.first.map({ _ in answersWithoutBody.removeFirst() }) else {
                throw .unsolicitedResponse
            }
            do { framing = try head.responseFraming(in: bytes, requestHadNoBody: noBody).get() } catch { throw .framing(error) }
            if informational {
                // It ends its connection as any message does (NIO refuses
                // what follows an HTTP/1.0 `100` without keep-alive).
                emit(.head(head, at: offset, framing: .none))
                state = head.connectionOptions(in: bytes).persists ? .head(HeadParser.Search()) : .closed
                return
            }
        }
        let options = head.connectionOptions(in: bytes)
        lastOnConnection = !options.persists
        upgradesAfter = parser.kind == .request && options.asksUpgrade
        emit(.head(head, at: offset, framing: framing))
        switch framing {
        case .none, .length(0): finishMessage(trailers: [], emit)
        case .length(let length): state = .length(length)
        case .chunked: state = .chunked(ChunkedBody(after: head, limits: parser))
        case .untilClose: state = .untilClose
        case .switchesProtocol:
            // NIO's decoder ends the message, then stops: what follows is not HTTP/1.
            emit(.end(trailers: []))
            state = .switched
        }
    }

    private mutating func finishMessage(trailers: [(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)], _ emit: (Event) -> Void) {
        emit(.end(trailers: trailers))
        state = upgradesAfter ? .switched : lastOnConnection ? .closed : .head(HeadParser.Search())
    }
}

/// Why a stream of messages was refused.
public enum MessageRefusal: Error, Equatable, Sendable {
    case head(HeadRefusal)
    case framing(FramingRefusal)
    case chunked(ChunkRefusal)
    /// Bytes after a message that ended its connection.
    case afterLastMessage
    /// A response with no request waiting for it.
    case unsolicitedResponse
    /// The connection closed inside a message.
    case cutOff
}

extension MessageRefusal: CustomStringConvertible {
    public var description: String {
        switch self {
        case .head(let refusal): return "a malformed head: \(refusal)"
        case .framing(let refusal): return "an ambiguous body: \(refusal.reason)"
        case .chunked(let refusal): return "a malformed chunked body: \(refusal)"
        case .afterLastMessage: return "bytes after a message that ended the connection"
        case .unsolicitedResponse: return "a response to no request"
        case .cutOff: return "the connection closed inside a message"
        }
    }
}
