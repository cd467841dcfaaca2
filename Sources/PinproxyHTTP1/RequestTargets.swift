/// The four forms of a request target (RFC 9112 §3.2), each narrower than
/// what NIO's decoder (llhttp's URL parser) takes, so that a target read
/// here is one it reads too: a path of visible ASCII after `/`; a scheme of
/// letters, `://`, a host of letters, digits and `-._~:[]` and then such a
/// path (no user information); `*` alone; and for CONNECT only, a host and
/// port.
enum RequestTargets {
    static func isValid(_ target: UnsafeRawBufferPointer, connect: Bool) -> Bool {
        guard let first = target.first else { return false }
        if connect { return isAuthority(target) }
        switch first {
        case UInt8(ascii: "/"):
            return true  // every byte is already `ByteClass.target`'s
        case UInt8(ascii: "*"):
            return target.count == 1
        default:
            return isAbsolute(target)
        }
    }

    /// `scheme://host[/path]`.
    private static func isAbsolute(_ target: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < target.count, isLetter(target[index]) { index += 1 }
        guard index > 0, target.count - index > 3,
              target[index] == UInt8(ascii: ":"), target[index + 1] == UInt8(ascii: "/"), target[index + 2] == UInt8(ascii: "/") else {
            return false
        }
        let end = hostEnd(target, from: index + 3)
        guard end > index + 3 else { return false }
        return end == target.count || target[end] == UInt8(ascii: "/") || target[end] == UInt8(ascii: "?")
    }

    /// `host:port`, a port of one to five digits.
    private static func isAuthority(_ target: UnsafeRawBufferPointer) -> Bool {
        guard hostEnd(target, from: 0) == target.count,
              let colon = target.lastIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        let port = target[(colon + 1)...]
        return (1...5).contains(port.count) && port.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// Where a host (and port) that starts at `start` ends.
    private static func hostEnd(_ target: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        while index < target.count, ByteClass.host[Int(target[index])] { index += 1 }
        return index
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }
}
