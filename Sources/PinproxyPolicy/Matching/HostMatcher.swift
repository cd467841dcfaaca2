/// Finds the policy for a host name: exact first, then `*.` (one label),
/// then `**.` with the longest suffix first — the most specific wins
/// (docs/contract.md §10). Built once per snapshot; a lookup is a few dictionary probes,
/// never a scan of every pattern.
public struct HostMatcher<Value: Sendable>: Sendable {
    private var exact: [String: Value] = [:]
    private var singleLabel: [String: Value] = [:]
    private var anyDepth: [String: Value] = [:]

    /// Later duplicates of a pattern are ignored (validation reports them).
    public init(_ entries: [(HostPattern, Value)]) {
        for (pattern, value) in entries {
            switch pattern.kind {
            case .exact: if exact[pattern.suffix] == nil { exact[pattern.suffix] = value }
            case .singleLabel: if singleLabel[pattern.suffix] == nil { singleLabel[pattern.suffix] = value }
            case .anyDepth: if anyDepth[pattern.suffix] == nil { anyDepth[pattern.suffix] = value }
            }
        }
    }

    public func match(_ host: String) -> Value? {
        let name = HostPattern.normalize(host)
        guard !name.isEmpty else { return nil }
        if let value = exact[name] { return value }
        // `*.x.com` for `a.x.com`: drop exactly the first label.
        if let dot = name.firstIndex(of: "."), let value = singleLabel[String(name[name.index(after: dot)...])] {
            return value
        }
        // `**.` suffixes from the longest (the name itself) to the shortest.
        var candidate = Substring(name)
        while true {
            if let value = anyDepth[String(candidate)] { return value }
            guard let dot = candidate.firstIndex(of: ".") else { return nil }
            candidate = candidate[candidate.index(after: dot)...]
        }
    }
}
