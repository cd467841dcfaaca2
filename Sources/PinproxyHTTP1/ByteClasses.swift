/// The byte classes of RFC 9110 and RFC 9112 the head parser tests each byte
/// against, as 256-entry tables so that each test is one load. The head
/// path's writers check what they send against the same classes.
public enum ByteClass {
    /// `tchar`: what a method and a field name are made of.
    public static let token: [Bool] = table { byte in
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// A request target's bytes: visible ASCII. No whitespace, no control
    /// characters and no bytes above 0x7E (a client percent-encodes them).
    static let target: [Bool] = table { (0x21...0x7E).contains($0) }

    /// A host and port in an absolute or authority-form target: letters,
    /// digits, `-._~`, and `:[]` for a port and an IPv6 literal.
    static let host: [Bool] = table { byte in
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~:[]".utf8.contains(byte)
        }
    }

    /// A field value's and a reason phrase's bytes: visible ASCII, space,
    /// horizontal tab and obs-text (0x80–0xFF). No other control character.
    public static let text: [Bool] = table { $0 == 0x09 || $0 == 0x20 || (0x21...0x7E).contains($0) || $0 >= 0x80 }

    /// Bytes no head holds anywhere: control characters but tab, CR and
    /// LF, and DEL.
    static let forbidden: [Bool] = table { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0D && $0 != 0x0A) || $0 == 0x7F }

    private static func table(_ member: (UInt8) -> Bool) -> [Bool] {
        (0...255).map { member(UInt8($0)) }
    }
}
