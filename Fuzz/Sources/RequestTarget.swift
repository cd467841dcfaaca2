import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2

/// Target `request`: the app's bytes. The first byte picks the connection:
/// `H`, one HTTP/2 stream of an intercepted session; otherwise even, an
/// intercepted session for intercept.test after its TLS layer; odd, the
/// listener (absolute-form and CONNECT). The rest is cut into reads (for
/// HTTP/2, into frames: see `frame`). After each read every upstream that
/// has a whole request head answers it.
///
/// The differential check: NIO's own HTTP/1 decoder reads what every
/// upstream received, and no upstream may see more requests than the app
/// made (one per HTTP/2 stream; as many as NIO's decoder finds in the
/// intercepted app's bytes). A body smuggled behind a head would be a
/// second request there.
enum RequestTarget {
    static let http2Mode = UInt8(ascii: "H")

    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        if mode == http2Mode { return runStream(input.dropFirst()) }
        let session = FuzzSession(intercepted: mode & 1 == 0)
        let app = RequestCounter()
        for segment in FuzzInput.segments(input.dropFirst()) {
            app.feed(ByteBuffer(bytes: segment))
            session.clientSends(segment)
            session.upstreamsAnswer()
        }
        if session.shape == .intercepted {
            let upstream = session.upstreamRequestCount()
            precondition(upstream <= app.requests, "upstreams received \(upstream) requests for the app's \(app.requests)")
        }
        session.finish()
    }

    private static func runStream(_ input: ArraySlice<UInt8>) {
        let session = FuzzSession(.http2Stream)
        var rules = StreamRules()
        for segment in FuzzInput.segments(input) {
            guard let payload = frame(segment).flatMap({ rules.admit($0) }) else { continue }
            session.clientSends(payload)
        }
        // The upstream answers once the stream's frames are in: an answer after
        // the head alone would end the exchange before its body could follow.
        session.upstreamsAnswer()
        let upstream = session.upstreamRequestCount()
        precondition(upstream <= 1, "upstreams received \(upstream) requests for one HTTP/2 stream")
        session.finish()
    }

    /// A lowercase RFC 9110 token character: what an HTTP/2 field name may hold.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// A segment as a frame payload: its first byte's low two bits pick
    /// HEADERS, DATA, trailers (HEADERS ending the stream) or an empty DATA
    /// ending it; bit 2 sets END_STREAM. A HEADERS block is the rest as
    /// `name: value` lines (pseudo-headers included), a DATA payload the rest.
    static func frame(_ segment: ArraySlice<UInt8>) -> HTTP2Frame.FramePayload? {
        guard let kind = segment.first else { return nil }
        let rest = segment.dropFirst()
        let endStream = kind & 4 != 0
        switch kind & 3 {
        case 0, 2:
            var headers = HPACKHeaders()
            for line in String(decoding: rest, as: UTF8.self).split(separator: "\n") {
                let trimmed = line.hasPrefix(":") ? line.dropFirst() : line[...]
                guard let colon = trimmed.firstIndex(of: ":") else { continue }
                let name = (line.hasPrefix(":") ? ":" : "") + trimmed[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                // Only what NIO's HTTP/2 handler lets through to a stream: its
                // HPACK decoder and header validation refuse the rest first.
                let bare = name.hasPrefix(":") ? name.dropFirst() : name[...]
                guard !bare.isEmpty, bare.utf8.allSatisfy(Self.isTokenByte(_:)),
                      !value.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) else { continue }
                headers.add(name: name, value: value)
            }
            return .headers(.init(headers: headers, endStream: endStream || kind & 3 == 2))
        case 1:
            return .data(.init(data: .byteBuffer(ByteBuffer(bytes: rest)), endStream: endStream))
        default:
            return .data(.init(data: .byteBuffer(ByteBuffer()), endStream: true))
        }
    }
}

/// What NIO's HTTP/2 connection handler lets reach a server stream, so the
/// target feeds only frames a real app could get there: the request HEADERS
/// first (valid request pseudo-headers, no connection-specific fields), then
/// DATA, then trailers (HEADERS with END_STREAM, no pseudo-headers), nothing
/// after END_STREAM, and DATA within a `content-length` that the stream's end
/// must meet. Anything else is a stream or connection error there (RST_STREAM
/// or GOAWAY), never delivered to the stream channel.
struct StreamRules {
    private enum State { case idle, open(remaining: Int?), closed }
    private var state = State.idle
    static let requestPseudo: Set<String> = [":method", ":scheme", ":path", ":authority", ":protocol"]
    static let connectionSpecific: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]

    mutating func admit(_ payload: HTTP2Frame.FramePayload) -> HTTP2Frame.FramePayload? {
        switch (state, payload) {
        case (.idle, .headers(let headers)):
            guard Self.validRequest(headers.headers) else { state = .closed; return nil }
            let lengths = headers.headers["content-length"]
            guard Set(lengths).count <= 1 else { state = .closed; return nil }
            var remaining: Int?
            if let length = lengths.first {
                guard let value = Int(length), value >= 0 else { state = .closed; return nil }
                remaining = value
            }
            return advance(payload, remaining: remaining, ends: headers.endStream, sent: 0)
        case (.open(let remaining), .data(let data)):
            return advance(payload, remaining: remaining, ends: data.endStream, sent: data.data.readableBytes)
        case (.open(let remaining), .headers(let trailers)):
            guard trailers.endStream, !trailers.headers.contains(where: { $0.name.hasPrefix(":") }) else { state = .closed; return nil }
            return advance(payload, remaining: remaining, ends: true, sent: 0)
        default:
            return nil
        }
    }

    private mutating func advance(_ payload: HTTP2Frame.FramePayload, remaining: Int?, ends: Bool, sent: Int) -> HTTP2Frame.FramePayload? {
        let left = remaining.map { $0 - sent }
        if let left, left < 0 || (ends && left != 0) { state = .closed; return nil }
        state = ends ? .closed : .open(remaining: left)
        return payload
    }

    static func validRequest(_ headers: HPACKHeaders) -> Bool {
        var seenRegular = false
        var counts: [String: Int] = [:]
        for (name, value, _) in headers {
            if name.hasPrefix(":") {
                guard !seenRegular, requestPseudo.contains(name) else { return false }
                counts[name, default: 0] += 1
            } else {
                seenRegular = true
                if connectionSpecific.contains(name) { return false }
                if name == "te", value != "trailers" { return false }
            }
        }
        guard counts.values.allSatisfy({ $0 == 1 }), counts[":method"] == 1 else { return false }
        if headers.first(name: ":method") == "CONNECT" { return true }
        return counts[":scheme"] == 1 && counts[":path"] == 1
    }
}
