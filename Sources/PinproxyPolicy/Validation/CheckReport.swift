import Foundation

/// What `pinproxy check` prints, from a load's diagnostics (docs/contract.md §2, §10).
/// Kept here rather than in the command so tests assert the exact output.
public struct CheckReport: Sendable {
    public let errors: [Diagnostic]
    public let warnings: [Diagnostic]

    /// `strict` turns every warning into an error (a CI gate). Files under
    /// `relativeTo` (the working directory) print relative to it, as typed.
    public init(diagnostics: [Diagnostic], strict: Bool = false, relativeTo directory: String? = nil) {
        var shown = diagnostics
        if let directory {
            let prefix = directory.hasSuffix("/") ? directory : directory + "/"
            for index in shown.indices where shown[index].location.file.hasPrefix(prefix) {
                shown[index].location.file.removeFirst(prefix.count)
            }
        }
        let sorted = shown.sortedByLocation()
        if strict {
            errors = sorted.map(\.asError)
            warnings = []
        } else {
            errors = sorted.errors
            warnings = sorted.warnings
        }
    }

    public var isValid: Bool { errors.isEmpty }
    public var exitCode: Int32 { isValid ? 0 : 1 }

    /// One `FILE:LINE:COL: severity: message` line a diagnostic, then a summary.
    public var text: String {
        var lines = (errors + warnings).sortedByLocation().map(\.description)
        let summary = "\(errors.count) error\(errors.count == 1 ? "" : "s"), \(warnings.count) warning\(warnings.count == 1 ? "" : "s")"
        lines.append(isValid ? "configuration valid (\(summary))" : "configuration invalid (\(summary))")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `{"valid": bool, "errors": [{"file","line","column","message"}], "warnings": [same]}`,
    /// keys in exactly that order (written by hand: `JSONEncoder` does not keep order).
    public var json: String {
        func entries(_ list: [Diagnostic]) -> String {
            "[" + list.map { d in
                "{\"file\": \(Self.quote(d.file)), \"line\": \(d.line), \"column\": \(d.column), \"message\": \(Self.quote(d.message))}"
            }.joined(separator: ", ") + "]"
        }
        return "{\"valid\": \(isValid), \"errors\": \(entries(errors)), \"warnings\": \(entries(warnings))}\n"
    }

    /// A JSON string literal.
    static func quote(_ text: String) -> String {
        JSONString.quote(text)
    }
}

extension DurationText {
    /// `--horizon`: a duration (`30d`, `720h`) or a bare number of days.
    public static func parseHorizon(_ text: String) -> Duration? {
        if !text.isEmpty, text.allSatisfy(\.isASCIIDigitChar), let days = Int64(text) {
            return .seconds(days * 86400)
        }
        return parse(text)
    }
}
