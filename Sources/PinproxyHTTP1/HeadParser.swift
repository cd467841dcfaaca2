/// Reads an HTTP/1.x message head (RFC 9112) from bytes, and refuses every
/// head NIO's HTTP/1 decoder refuses: a head this accepts, NIO's decoder
/// accepts with the same method, target, version, status and fields, in the
/// same order (Tests/PinproxyHTTP1Tests and the `head` fuzz target check this
/// against NIO on the same inputs).
///
/// It is stricter than NIO in a few places no client pinproxy serves relies
/// on, each a shape some other parser reads differently: a target holds
/// visible ASCII only, a field value no control character but the tab, and
/// the version is `HTTP/1.0` or `HTTP/1.1` exactly.
///
/// It is a pure function of the bytes: it looks for the head's end (the
/// first empty line) and reads each line once, as soon as its CRLF has come
/// (a bad line is refused then, as NIO's decoder refuses it, not at the
/// head's end or at a timeout), and the whole head once it has ended; so a
/// head that arrives a byte at a time is scanned once, not parsed once per
/// byte (`Search`). The framing of the body that follows is not its concern.
public struct HeadParser: Sendable {
    public enum Kind: Sendable {
        case request
        case response
    }

    public enum Outcome: Equatable, Sendable {
        /// No end of the head yet, and within the bound: read more.
        case incomplete
        case head(ParsedHead)
        case refused(HeadRefusal)
    }

    public let kind: Kind
    /// NIO's `maxHeaderListSize`: the target's bytes and every name's and
    /// value's together, whitespace and line ends not counted.
    public let maxFieldBytes: Int
    /// NIO's `maxHeaderFieldCount`.
    public let maxFieldCount: Int

    public init(kind: Kind, maxFieldBytes: Int, maxFieldCount: Int) {
        self.kind = kind
        self.maxFieldBytes = maxFieldBytes
        self.maxFieldCount = maxFieldCount
    }

    /// The most bytes a head may take, whitespace and line ends included,
    /// before its end must have been seen: twice what its counted bytes may
    /// be, and room for a start line.
    public var maxHeadBytes: Int { 2 * maxFieldBytes + 1024 }

    /// How far earlier calls on the same bytes looked at a head that had
    /// not ended, so that the next call looks only at what is new.
    public struct Search: Equatable, Sendable {
        /// Searched this far for the head's end.
        public var searchedTo = 0
        /// Where the next line to read early begins (the start line at 0):
        /// each line is read as soon as its CRLF has come, once. Nil once
        /// the early reading stopped at a line that does not end in CRLF;
        /// the rest is left to the whole head's reading.
        var nextLine: Int? = 0
        /// What the lines read early counted against `maxFieldBytes` (the
        /// target's bytes included), and how many fields they were.
        var counted = 0
        var fields = 0

        public init() {}
    }

    /// Parses the head at the start of `bytes`. `search`: what earlier
    /// calls on the same bytes found (a new `Search` at first); updated.
    public func parse(_ bytes: UnsafeRawBufferPointer, search: inout Search) -> Outcome {
        guard let length = Self.endOfHead(bytes, from: search.searchedTo) else {
            // Bytes no head can hold are refused as they come, as NIO's
            // decoder refuses them, not once the head's end or bound is
            // reached (an upstream that sends garbage and waits is answered
            // at once, not at its timeout).
            if let refusal = earlyRefusal(bytes, newFrom: search.searchedTo) { return .refused(refusal) }
            if let refusal = lineRefusal(bytes, newFrom: search.searchedTo, search: &search) { return .refused(refusal) }
            search.searchedTo = max(0, bytes.count - 3)
            return bytes.count > maxHeadBytes ? .refused(.tooLarge) : .incomplete
        }
        guard length <= maxHeadBytes else { return .refused(.tooLarge) }
        var reader = HeadReader(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<length]), parser: self)
        do {
            return .head(try reader.read())
        } catch {
            return .refused(error)
        }
    }

    /// Parses a whole head held in `bytes` (tests and fuzzing).
    public func parse(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        var search = Search()
        return parse(bytes, search: &search)
    }

    /// Why the start of a head that has not ended cannot be one: a response
    /// that does not begin `HTTP/`, a request whose method holds a byte no
    /// method holds, or a control character (but tab, CR and LF) anywhere.
    /// Only the bytes from `newFrom` on are scanned for those.
    private func earlyRefusal(_ bytes: UnsafeRawBufferPointer, newFrom: Int) -> HeadRefusal? {
        switch kind {
        case .response:
            let prefix = Self.responsePrefix
            for index in 0..<min(prefix.count, bytes.count) where bytes[index] != prefix[index] {
                return .badVersion
            }
        case .request:
            // The method so far must be a known method or the start of one.
            var index = 0
            while index < min(bytes.count, RequestMethods.longest + 1), bytes[index] != 0x20 { index += 1 }
            let method = UnsafeRawBufferPointer(rebasing: bytes[0..<index])
            if index < bytes.count ? !RequestMethods.isKnown(method) : !RequestMethods.isStart(method) { return .unknownMethod }
        }
        for index in newFrom..<bytes.count where ByteClass.forbidden[Int(bytes[index])] {
            return .badFieldValue
        }
        return nil
    }

    private static let responsePrefix = Array("HTTP/".utf8)

    /// Why a line of a head that has not ended, once its CRLF has come,
    /// cannot be one: the start line, then each field line, read in order
    /// as the whole head's reading reads them, from where the last one
    /// ended and with what the lines before counted. So it refuses the same
    /// line with the same reason, only sooner: a bad target or version, a
    /// bad field name, a folded line, a bare CR, one field or one byte over
    /// the limits, each as NIO's decoder refuses it, not at the head's end
    /// or at a timer. Each line is read once, and its LF is searched for
    /// only in bytes no earlier call searched (`newFrom`, a few bytes back:
    /// every LF before those ended a line read then), so a head sent a byte
    /// at a time costs no more than one sent whole. A line read ends in
    /// CRLF, so the reading stays inside it; a line that does not stops the
    /// early reading and is left to the whole head's.
    private func lineRefusal(_ bytes: UnsafeRawBufferPointer, newFrom: Int, search: inout Search) -> HeadRefusal? {
        guard var lineStart = search.nextLine else { return nil }
        var searchFrom = max(lineStart, newFrom)
        while searchFrom < bytes.count,
              let lineFeed = UnsafeRawBufferPointer(rebasing: bytes[searchFrom...]).firstIndex(of: 0x0A).map({ searchFrom + $0 }) {
            guard lineFeed > lineStart, bytes[lineFeed - 1] == 0x0D else {
                search.nextLine = nil
                return nil
            }
            var reader = HeadReader(bytes: UnsafeRawBufferPointer(rebasing: bytes[0...lineFeed]), parser: self,
                                    at: lineStart, counted: search.counted)
            do {
                if lineStart == 0 {
                    _ = try reader.readStartLine()
                } else {
                    // A CR first ends the fields for the whole head's reading;
                    // not followed by LF (this is no head's end), it is a bare CR.
                    if bytes[lineStart] == 0x0D { return .bareLineEnd }
                    guard search.fields < maxFieldCount else { return .tooManyFields }
                    _ = try reader.readFieldLine()
                    search.fields += 1
                }
            } catch {
                return error
            }
            search.counted = reader.counted
            lineStart = lineFeed + 1
            search.nextLine = lineStart
            searchFrom = lineStart
        }
        return nil
    }

    /// The length of the head, its closing CRLF CRLF included, if `bytes`
    /// holds its end.
    static func endOfHead(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start
        let count = bytes.count
        while index + 3 < count {
            // Look at the window's last byte first. Neither CR nor LF: no
            // window holding it can match, so the next starts after it. CR:
            // it can be the third byte of the next window. LF but no match:
            // it can be the second byte of the window two on.
            switch bytes[index + 3] {
            case 0x0A:
                if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D {
                    return index + 4
                }
                index += 2
            case 0x0D:
                index += 1
            default:
                index += 4
            }
        }
        return nil
    }
}

/// One pass over a complete head (it ends with CRLF CRLF).
private struct HeadReader {
    let bytes: UnsafeRawBufferPointer
    let parser: HeadParser
    var index = 0
    var counted = 0

    init(bytes: UnsafeRawBufferPointer, parser: HeadParser) {
        self.bytes = bytes
        self.parser = parser
    }

    /// A reader that resumes at `index`, where a line begins, with what
    /// the lines before it counted (a line read as soon as it has come).
    init(bytes: UnsafeRawBufferPointer, parser: HeadParser, at index: Int, counted: Int) {
        self.init(bytes: bytes, parser: parser)
        self.index = index
        self.counted = counted
    }

    mutating func read() throws(HeadRefusal) -> ParsedHead {
        var head = try readStartLine()
        head.fields.reserveCapacity(12)
        // The field lines, up to the empty line that ends the head.
        while bytes[index] != 0x0D {
            guard head.fields.count < parser.maxFieldCount else { throw .tooManyFields }
            head.fields.append(try readFieldLine())
        }
        try expectLineEnd()
        head.countedBytes = counted
        return head
    }

    // MARK: Start lines

    /// The head with its start line read and no fields yet: the whole
    /// head's first step, or the start line alone in bytes that end with
    /// its CRLF.
    mutating func readStartLine() throws(HeadRefusal) -> ParsedHead {
        var head = ParsedHead(length: bytes.count, minorVersion: 1, method: .empty, target: .empty,
                              status: 0, reason: .empty, fields: [])
        switch parser.kind {
        case .request:
            try readRequestLine(into: &head)
        case .response:
            try readStatusLine(into: &head)
        }
        return head
    }

    private mutating func readRequestLine(into head: inout ParsedHead) throws(HeadRefusal) {
        let methodStart = index
        while ByteClass.token[Int(bytes[index])] { index += 1 }
        head.method = ByteSpan(start: methodStart, count: index - methodStart)
        guard bytes[index] == 0x20,
              RequestMethods.isKnown(UnsafeRawBufferPointer(rebasing: bytes[methodStart..<index])) else {
            throw .unknownMethod
        }
        index += 1
        let targetStart = index
        while ByteClass.target[Int(bytes[index])] { index += 1 }
        head.target = ByteSpan(start: targetStart, count: index - targetStart)
        guard bytes[index] == 0x20,
              RequestTargets.isValid(UnsafeRawBufferPointer(rebasing: bytes[targetStart..<index]),
                                     connect: head.method(in: bytes, is: "CONNECT")) else {
            throw .badTarget
        }
        try count(head.target.count)
        index += 1
        head.minorVersion = try readVersion()
        try expectLineEnd()
    }

    private mutating func readStatusLine(into head: inout ParsedHead) throws(HeadRefusal) {
        head.minorVersion = try readVersion()
        guard bytes[index] == 0x20 else { throw .badVersion }
        index += 1
        var status = 0
        for _ in 0..<3 {
            let digit = bytes[index]
            guard digit >= 0x30, digit <= 0x39 else { throw .badStatus }
            status = status * 10 + Int(digit - 0x30)
            index += 1
        }
        guard status >= 100 else { throw .badStatus }
        head.status = status
        // `HTTP/1.1 200` with no reason phrase, and no space before it, is
        // read as NIO reads it: an empty reason.
        if bytes[index] == 0x20 {
            index += 1
            let reasonStart = index
            while ByteClass.text[Int(bytes[index])] { index += 1 }
            head.reason = ByteSpan(start: reasonStart, count: index - reasonStart)
        }
        guard bytes[index] == 0x0D else {
            throw bytes[index] == 0x0A ? .bareLineEnd : (head.reason == .empty ? .badStatus : .badReason)
        }
        try expectLineEnd()
    }

    /// `HTTP/1.0` or `HTTP/1.1`: the minor version.
    private mutating func readVersion() throws(HeadRefusal) -> Int {
        guard bytes.count - index >= 8 else { throw .badVersion }
        for (offset, expected) in Self.versionPrefix.enumerated() where bytes[index + offset] != expected {
            throw .badVersion
        }
        let minor = bytes[index + 7]
        guard minor == 0x30 || minor == 0x31 else { throw .badVersion }
        index += 8
        return Int(minor - 0x30)
    }

    private static let versionPrefix = Array("HTTP/1.".utf8)

    // MARK: Field lines

    /// One field line, with its CRLF: its bytes end at their LF at the latest.
    mutating func readFieldLine() throws(HeadRefusal) -> FieldSpan {
        let nameStart = index
        if bytes[nameStart] == 0x20 || bytes[nameStart] == 0x09 { throw .foldedLine }
        while ByteClass.token[Int(bytes[index])] { index += 1 }
        let name = ByteSpan(start: nameStart, count: index - nameStart)
        guard name.count > 0, bytes[index] == 0x3A else {
            throw bytes[index] == 0x0A ? .bareLineEnd : .badFieldName
        }
        try count(name.count)
        index += 1
        while bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
        let valueStart = index
        var valueEnd = index
        while ByteClass.text[Int(bytes[index])] {
            if bytes[index] != 0x20 && bytes[index] != 0x09 { valueEnd = index + 1 }
            index += 1
        }
        guard bytes[index] == 0x0D else {
            throw bytes[index] == 0x0A ? .bareLineEnd : .badFieldValue
        }
        let value = ByteSpan(start: valueStart, count: valueEnd - valueStart)
        // NIO counts a value with its trailing whitespace: so does the limit here.
        try count(index - valueStart)
        try expectLineEnd()
        return FieldSpan(name: name, value: value)
    }

    // MARK: Pieces

    /// CR LF, and nothing else, ends a line.
    private mutating func expectLineEnd() throws(HeadRefusal) {
        guard bytes[index] == 0x0D else { throw bytes[index] == 0x0A ? .bareLineEnd : .badVersion }
        guard bytes[index + 1] == 0x0A else { throw .bareLineEnd }
        index += 2
    }

    /// Adds to the bytes the limit counts, as NIO's decoder counts them.
    private mutating func count(_ bytes: Int) throws(HeadRefusal) {
        counted += bytes
        guard counted <= parser.maxFieldBytes else { throw .tooLarge }
    }
}
