/// A policy's `match:` pattern (docs/contract.md §10). `api.x.com` is exact;
/// `*.x.com` matches exactly one more label (`a.x.com`, not `a.b.x.com` nor
/// `x.com`); `**.x.com` matches any depth, `x.com` itself included. Names
/// compare case-insensitively with any trailing dot ignored.
public struct HostPattern: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        case exact
        case singleLabel
        case anyDepth
    }

    public let kind: Kind
    /// The normalized name after any `*.`/`**.` prefix.
    public let suffix: String
    /// As written, for metrics labels and messages (docs/contract.md §6: the `host`
    /// label is the pattern, never a client-supplied name).
    public let text: String

    public init(parsing text: String) throws(HostPatternError) {
        let normalized = HostPattern.normalize(text)
        let kind: Kind
        let suffix: String
        if normalized.hasPrefix("**.") {
            (kind, suffix) = (.anyDepth, String(normalized.dropFirst(3)))
        } else if normalized.hasPrefix("*.") {
            (kind, suffix) = (.singleLabel, String(normalized.dropFirst(2)))
        } else {
            (kind, suffix) = (.exact, normalized)
        }
        guard !suffix.isEmpty else {
            throw HostPatternError(message: "host pattern `\(text)` names no domain")
        }
        if suffix.contains("*") {
            throw HostPatternError(message: "host pattern `\(text)`: a wildcard may only be the whole first label (`*.x.com` or `**.x.com`)")
        }
        let isIP = IPAddress.parse(suffix) != nil
        if !isIP {
            let labels = suffix.split(separator: ".", omittingEmptySubsequences: false)
            let valid = labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63
                    && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
            }
            guard valid else {
                throw HostPatternError(message: "host pattern `\(text)` is not a valid host name")
            }
        } else if kind != .exact {
            throw HostPatternError(message: "host pattern `\(text)`: an IP address cannot take a wildcard")
        }
        self.kind = kind
        self.suffix = suffix
        self.text = text
    }

    /// True when `host` (a CONNECT host or an absolute-form request's host) matches.
    public func matches(_ host: String) -> Bool {
        let name = HostPattern.normalize(host)
        switch kind {
        case .exact:
            return name == suffix
        case .singleLabel:
            guard name.hasSuffix("." + suffix) else { return false }
            // A byte search: `contains(".")` is Foundation's substring search
            // here (Foundation is visible in this module), a bridged copy per
            // match. The suffix is ASCII, so its bytes are its characters.
            return !name.utf8.dropLast(suffix.utf8.count + 1).contains(UInt8(ascii: "."))
        case .anyDepth:
            return name == suffix || name.hasSuffix("." + suffix)
        }
    }

    /// The pattern in normal form (lowercase, no trailing dot): two patterns
    /// with the same key are duplicates.
    public var key: String {
        switch kind {
        case .exact: return suffix
        case .singleLabel: return "*." + suffix
        case .anyDepth: return "**." + suffix
        }
    }

    public var description: String { text }

    /// Lowercase, trailing dot and IPv6 brackets removed, IP literals in
    /// their one canonical spelling (`IPLiteral`), so no other spelling of an
    /// address can slip past a policy written for it.
    public static func normalize(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        return IPLiteral.canonical(name)
    }
}

public struct HostPatternError: Error, Sendable, Hashable {
    public var message: String
}
