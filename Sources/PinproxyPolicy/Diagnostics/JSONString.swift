import Foundation

/// JSON string literals for the documents pinproxy writes by hand (check
/// reports, refusal bodies, log lines): small, fixed shapes whose key order
/// the contract shows, which JSONEncoder on Linux does not keep.
public enum JSONString {
    /// `text` as a quoted JSON string.
    public static func quote(_ text: String) -> String {
        "\"" + escape(text) + "\""
    }

    private static func needsEscaping(_ text: String) -> Bool {
        text.utf8.contains(where: needsEscaping)
    }

    /// Whether `byte` changes between JSON quotes: a quote, a backslash or a
    /// control character (every byte of a multi-byte character stays).
    public static func needsEscaping(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// `text` escaped for use between JSON quotes.
    public static func escape(_ text: String) -> String {
        // Most text (hosts, paths, addresses) needs no escaping: return it as it is.
        if !needsEscaping(text) { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
