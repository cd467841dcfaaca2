/// What libyaml's terse errors most likely mean, in words that point at the
/// fix (docs/contract.md §3 "Errors and warnings").
enum YAMLHint {
    /// "mapping values are not allowed in this context": a `key:` where libyaml
    /// is still reading a plain value. Either the value itself holds `: `
    /// (then it needs quotes), or the line is indented deeper than the key
    /// above it, so it reads as the rest of that key's value: the usual slip,
    /// and the message then names the line where that mapping started.
    static func mappingValues(text: String, line: Int, column: Int, file: String) -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Substring($0.drop { $0 == "\r" }) }
        guard line >= 1, line <= lines.count else { return "" }
        let here = lines[line - 1]
        let indent = here.prefix { $0 == " " }.count
        let beforeMark = here.prefix(max(0, column - 1)).dropFirst(indent)
        if beforeMark.dropFirst(beforeMark.hasPrefix("- ") ? 2 : 0).contains(": ") {
            return "; this value holds `: `: put it in quotes (\"…\")"
        }
        for number in stride(from: line - 1, through: 1, by: -1) {
            let above = lines[number - 1]
            let content = above.drop { $0 == " " }
            if content.isEmpty || content.hasPrefix("#") { continue }
            let aboveIndent = above.count - content.count
            guard aboveIndent < indent else { continue }
            // The key whose value runs on: after the indentation and a list dash.
            let keyStart = aboveIndent + (content.hasPrefix("- ") ? 2 : 0)
            let key = above.dropFirst(keyStart).prefix { $0 != ":" }
            return "; probably indentation: line \(line) is indented deeper than `\(key):` at \(file):\(number):\(keyStart + 1), "
                + "so it reads as the rest of that value; indent it like the keys beside it, "
                + "or, if it belongs under `\(key)`, move that key's value onto lines of its own"
        }
        return "; probably indentation: check that this key lines up with the keys beside it"
    }
}
