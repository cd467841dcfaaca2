/// What the first bytes of a redirected connection say about it, read
/// without consuming them (the same bytes go on to TLS or HTTP).
enum ClientHelloPeek: Equatable {
    /// Not enough bytes yet to tell.
    case needMore
    /// A TLS ClientHello; `serverName` is its SNI (nil: the app sent none).
    case tls(serverName: String?)
    /// Not TLS: plain HTTP (or something else) redirected from port 80.
    case notTLS
    /// TLS records that are not a well-formed ClientHello.
    case malformed(String)

    /// The longest ClientHello read (RFC 8446 allows 2^24 - 1; real ones,
    /// post-quantum key shares included, stay well under this).
    static let maxHelloBytes = 16384

    /// Reads `bytes` (everything received so far). A ClientHello may span
    /// several handshake records; their fragments are joined first.
    static func read(_ bytes: [UInt8]) -> ClientHelloPeek {
        guard let first = bytes.first else { return .needMore }
        guard first == 0x16 else { return .notTLS }  // handshake record
        var handshake: [UInt8] = []
        var offset = 0
        while true {
            guard bytes.count >= offset + 5 else { return .needMore }
            guard bytes[offset] == 0x16 else { return .malformed("a record that is not a handshake inside the ClientHello") }
            let length = Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
            guard length > 0 else { return .malformed("an empty handshake record") }
            guard bytes.count >= offset + 5 + length else { return .needMore }
            handshake += bytes[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
            if handshake.count >= 4 {
                guard handshake[0] == 0x01 else { return .malformed("the first handshake message is not a ClientHello") }
                let helloLength = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
                guard helloLength <= maxHelloBytes else { return .malformed("a ClientHello of \(helloLength) bytes") }
                if handshake.count >= 4 + helloLength {
                    return serverName(in: Array(handshake[4..<(4 + helloLength)]))
                }
            }
        }
    }

    /// The SNI of a ClientHello body (RFC 8446 §4.1.2, RFC 6066 §3).
    private static func serverName(in hello: [UInt8]) -> ClientHelloPeek {
        var cursor = Cursor(bytes: hello)
        guard cursor.skip(2 + 32),  // legacy_version, random
              let sessionID = cursor.byte(), cursor.skip(Int(sessionID)),
              let suites = cursor.uint16(), cursor.skip(suites),
              let compressions = cursor.byte(), cursor.skip(Int(compressions)) else {
            return .malformed("a truncated ClientHello")
        }
        guard cursor.remaining > 0 else { return .tls(serverName: nil) }  // no extensions at all
        guard let extensionsLength = cursor.uint16(), extensionsLength <= cursor.remaining else {
            return .malformed("a ClientHello whose extensions overrun it")
        }
        var extensions = Cursor(bytes: Array(hello[cursor.offset..<(cursor.offset + extensionsLength)]))
        while extensions.remaining > 0 {
            guard let type = extensions.uint16(), let length = extensions.uint16(), let body = extensions.take(length) else {
                return .malformed("a truncated ClientHello extension")
            }
            guard type == 0 else { continue }  // server_name
            var list = Cursor(bytes: body)
            guard let listLength = list.uint16(), listLength <= list.remaining else { return .malformed("a bad server_name list") }
            while list.remaining > 0 {
                guard let nameType = list.byte(), let nameLength = list.uint16(), let name = list.take(nameLength) else {
                    return .malformed("a bad server_name entry")
                }
                if nameType == 0 {  // host_name: ASCII, no NUL
                    guard !name.isEmpty, name.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                        return .malformed("a server_name that is not a host name")
                    }
                    return .tls(serverName: String(decoding: name, as: UTF8.self))
                }
            }
            return .tls(serverName: nil)
        }
        return .tls(serverName: nil)
    }

    private struct Cursor {
        let bytes: [UInt8]
        var offset = 0
        var remaining: Int { bytes.count - offset }

        mutating func byte() -> UInt8? {
            guard remaining >= 1 else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func uint16() -> Int? {
            guard remaining >= 2 else { return nil }
            defer { offset += 2 }
            return Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
        }

        mutating func skip(_ count: Int) -> Bool {
            guard remaining >= count else { return false }
            offset += count
            return true
        }

        mutating func take(_ count: Int) -> [UInt8]? {
            guard remaining >= count else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }
    }
}
